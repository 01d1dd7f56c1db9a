"""Generate the lint rule pages when the site is built (mkdocs-gen-files runs this script).

One page per rule, `rules/<name>.md`, from the rule's own metadata and documentation (the text
`dpwise lint --explain` prints), and `rules/index.md`, the table of every rule. The "Lint rules"
section of the nav in mkdocs.yml gets one entry per rule after its index page. Nothing here is
written by hand: a rule added to dpwise gets its page at the next build.
"""

from __future__ import annotations

import re

import mkdocs_gen_files

from dpwise.lint import reach
from dpwise.lint.rules import FIXERS, RULES

NAV_SECTION = "Lint rules"
INDEX = "rules/index.md"

# A rule's docs may end with "## Fix (safe)", "## Fix (unsafe)" or "## Fix" (safety depends on
# the case, as the section says).
FIX_HEADING = re.compile(r"^## Fix(?: \((safe|unsafe)\))?\s*$", re.MULTILINE)


def fix_of(rule) -> tuple[str, str]:
    """(short label for the table, sentence for the rule's page)."""
    heading = FIX_HEADING.search(rule.docs)
    has_fixer = rule.code in FIXERS
    if has_fixer != (heading is not None):
        raise SystemExit(
            f"{rule.code} {rule.name}: "
            + (
                "has a fixer but its docs have no '## Fix' section"
                if has_fixer
                else "its docs have a '## Fix' section but it has no fixer"
            )
        )
    if not has_fixer:
        return "–", "none: findings of this rule are not fixed automatically."
    safety = heading.group(1)
    if safety == "safe":
        return "safe", "safe: applied by `dpwise lint --fix` (see [Fix (safe)](#fix-safe))."
    if safety == "unsafe":
        return "unsafe", (
            "unsafe: applied only with `dpwise lint --fix --unsafe-fixes`; review it with"
            " `--diff` first (see [Fix (unsafe)](#fix-unsafe))."
        )
    return "safe or unsafe", (
        "safe for some of its findings, unsafe for others, as [Fix](#fix) says; `--fix` applies"
        " the safe ones, `--fix --unsafe-fixes` all of them."
    )


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rule_page(rule) -> str:
    _, fix_sentence = fix_of(rule)
    return "\n".join(
        [
            f"# {rule.code} {rule.name}",
            "",
            "| | |",
            "|---|---|",
            f"| Code | `{rule.code}` |",
            f"| Name | `{rule.name}` |",
            f"| Severity | {rule.severity} |",
            f"| Summary | {cell(rule.summary)} |",
            f"| Fix | {cell(fix_sentence)} |",
            "",
            f"Reported as: {rule.message}",
            "",
            f"Help: {rule.help}",
            "",
            f"Select or ignore it with `--select {rule.code}` / `--ignore {rule.name}`; silence"
            f" one line with `# dpwise: noqa: {rule.code}`. `dpwise lint --explain {rule.name}`"
            " prints the text below.",
            "",
            rule.docs.rstrip(),
            "",
            reach.section(rule.name),
        ]
    )


def index_page() -> str:
    fixable = sum(1 for r in RULES if r.code in FIXERS)
    lines = [
        "# Lint rules",
        "",
        f"`dpwise lint` has {len(RULES)} rules; {fixable} of them can fix what they find."
        " Codes are stable. Each page below is generated, when this site is built, from the"
        " rule's own documentation, the text `dpwise lint --explain NAME_OR_CODE` prints."
        " How to run the linter, choose rules and apply fixes: [dpwise lint](../lint.md).",
        "",
        "| code | name | severity | fix | summary |",
        "|---|---|---|---|---|",
    ]
    for r in RULES:
        label, _ = fix_of(r)
        page = f"{r.name}.md"
        lines.append(
            f"| [{r.code}]({page}) | [`{r.name}`]({page}) | {r.severity} | {label}"
            f" | {cell(r.summary)} |"
        )
    lines += [
        "",
        "A **safe** fix keeps the program's behaviour and is applied by `--fix`; an **unsafe**"
        " fix changes behaviour on purpose and is applied only with `--fix --unsafe-fixes`.",
        "",
    ]
    return "\n".join(lines)


def extend_nav() -> None:
    """Append one nav entry per rule to the section whose first entry is the rules index."""
    nav = mkdocs_gen_files.config.nav
    for entry in nav or []:
        if isinstance(entry, dict) and NAV_SECTION in entry:
            section = entry[NAV_SECTION]
            if (
                isinstance(section, list)
                and section
                and INDEX in (section[0] if isinstance(section[0], str) else section[0].values())
            ):
                del section[1:]  # idempotent when `mkdocs serve` rebuilds
                section.extend({f"{r.code} {r.name}": f"rules/{r.name}.md"} for r in RULES)
                return
    raise SystemExit(f"mkdocs.yml: no nav section {NAV_SECTION!r} starting with {INDEX}")


def generate() -> None:
    for rule in RULES:
        with mkdocs_gen_files.open(f"rules/{rule.name}.md", "w") as f:
            f.write(rule_page(rule))
    with mkdocs_gen_files.open(INDEX, "w") as f:
        f.write(index_page())
    extend_nav()


# mkdocs-gen-files runs this file with runpy.run_path (run name "<run_path>"); run under another
# name (a test's run_path(..., run_name=...)), it only defines the functions above.
if __name__ in ("<run_path>", "__main__"):
    generate()
