"""What the analysis follows for each rule, and where it stops: one table, printed under each
rule's docs (`dpwise lint --explain`, the rule pages). What every rule shares comes first."""

from __future__ import annotations

HEADING = "## What the analysis follows, and where it stops"

COMMON = """\
Every rule reads the file parsed, never imported. Names are resolved through the file's imports and
aliases, and through a name the file binds once to an imported class or function taken as a value
(`Wrapper = DistributedDataParallel`, `make_ddp = functools.partial(DistributedDataParallel,
...)`); same-file functions are followed through their calls (each call site, cycles stopped),
methods too: `self.method()` in a class, and `env.start()` where `env = Environment()` of a
same-file class is the name's one assignment. A file is a program when it has an `if __name__ ==
"__main__":` block, distributed set-up at module level, or another entry point (`fire.Fire`,
`typer.run`, `@hydra.main`, `@click.command`, a Typer app's command, a console script of the
project's `pyproject.toml`, `setup.cfg` or `setup.py`). Modules of the project are read from disk
where a rule says so above, found as Python finds them from the script (beside it, in a package,
one or two folders up), a package's `__init__.py` re-exports followed three deep. Not followed by
any rule: code of installed packages, values stored in containers or passed to functions the file
does not define, methods of instances of other modules' classes, and code run through `exec`,
`eval` or string templates. From `from util import *` of a project module, a script gets the
modules that module imports (`utils.init_distributed_mode` where `util/__init__.py` says `import
util.utils as utils`); other names it binds are not followed. Bounds that are hit are said
(`analysis-incomplete`)."""

PER_RULE = {
    "syntax-error": "The file's text only: it is parsed as the Python running dpwise parses it.",
    "data-parallel-usage": (
        "Every `nn.DataParallel(...)` of the file, however imported or aliased. A DataParallel "
        "built in another module and returned here is not seen."
    ),
    "missing-set-device": (
        "Same-file set-up functions through their calls; a call into another module named like "
        "a set-up (`init_distributed_mode(args)`) is trusted to set the device. A device set by "
        "another module's helper that is not named like a set-up is not seen."
    ),
    "ddp-before-init-process-group": (
        "The order of the file's statements, through same-file functions and their call sites; "
        "a group made by a project helper counts as made where the helper is called. The order "
        "of calls inside other modules is not followed."
    ),
    "missing-distributed-sampler": (
        "Loaders built in the file, and loaders built by a project helper (`get_dataloader()` "
        "beside the script, or re-exported by a package) with no sampler and no notion of ranks. "
        "A loader built by an installed library or a framework is not seen."
    ),
    "missing-set-epoch": (
        "Samplers built in the file or handed back by a project helper (through a package's "
        "re-exports); the file's epoch loops; `set_epoch` on any receiver in the file. A "
        "`set_epoch` inside another module's training function called from here is not seen."
    ),
    "shuffle-with-sampler": (
        "The `DataLoader(...)` call's own arguments; arguments passed through `**kwargs` or a "
        "config object are not seen."
    ),
    "spawn-under-torchrun": (
        "Reads of the launcher's variables and mentions of torchrun in the file. A job script, "
        "README or Makefile that launches it with torchrun is not read."
    ),
    "hardcoded-master-port": (
        "Literals through variables, f-strings, `+`, `str()`, module constants, parameter "
        "defaults that no call overrides, `args.` attributes and their `add_argument` defaults; "
        "placeholder addresses are left alone. A port written in a JSON or YAML config, or in "
        "another module's constant, is not read."
    ),
    "unguarded-rank-side-effect": (
        "Rank guards through same-file functions and their call sites, early exits and flags; a "
        "`print` replaced by a set-up helper of the file or of a project module (four modules "
        "deep); a process group made by a project helper, four modules deep. A guard applied by "
        "a caller in another module is not seen: a function this file never calls is not "
        "judged."
    ),
    "wrapped-state-dict": (
        "The wrapper through assignments, `self.` attributes of one class, same-file function "
        "parameters, closures (the enclosing function's last value) and conditional expressions; "
        "a project helper that returns a DDP model; another module's saver named like one. A "
        "wrapper that reaches the save through a container or another module's object is not "
        "seen."
    ),
    "missing-destroy-process-group": (
        "Set-up helpers through the project's modules, four deep (an import cycle stops the "
        "search; reaching the bound is an `analysis-incomplete` note); clean-up helpers of other "
        "modules trusted by name; another program's `main()` run by a wrapper is that program's "
        "to clean up."
    ),
    "grad-scaler-in-loop": (
        "`GradScaler(...)` inside a loop of the file, or in a same-file function called from one. "
        "A scaler made by another module's function called every step is not seen."
    ),
    "deprecated-amp-api": (
        "Calls, decorators, and the old entry points taken as values (an alias, one side of a "
        "conditional, `functools.partial`). One passed as an argument to another function, or "
        "kept in a container, is not followed."
    ),
    "accumulation-without-no-sync": (
        "The loops (each branch of an `if` on its own) and one-micro-step functions of the file "
        "that builds the DDP model; `no_sync` through a helper of the file or of a project "
        "module. A backward run inside another module's object (a loss scaler's `__call__`) is "
        "not seen."
    ),
    "batchnorm-without-sync": (
        "BatchNorm layers in the file and in the project modules it imports. A model of an "
        "installed library is not inspected."
    ),
    "file-not-checked": "The file's size and nesting depth.",
    "collective-under-rank-guard": (
        "Collectives and DDP forward passes under rank guards in the file, through same-file "
        "functions. A collective inside another module's helper called under a guard is not seen."
    ),
    "reentrant-checkpoint-with-ddp": (
        "Activation checkpointing calls in a file that builds the DDP model. A checkpoint call in "
        "a model module of another file is not seen."
    ),
    "no-sync-without-forward": (
        "The file's `no_sync()` blocks and the forward calls inside them, through same-file "
        "functions. A forward hidden in another module's helper is not seen."
    ),
    "find-unused-parameters": (
        "The DDP call's own keyword. A value passed through `**kwargs` or a config object is not "
        "seen."
    ),
    "loss-divided-by-world-size": (
        "Divisions of a loss by a world-size value in the file, through names assigned from it. "
        "A division inside another module's loss function is not seen."
    ),
    "analysis-incomplete": "Its own bounds: 2 s per file, four modules per set-up helper.",
}


def section(name: str) -> str:
    """The section printed under a rule's docs."""
    return f"{HEADING}\n{PER_RULE[name]}\n\n{COMMON}\n"
