"""Owns: the results schema: typed records (Run, CheckResult), the results document (results.json),
the run filters that read a strategy's traits.
May import: strategies (for the traits the run filters read)
Imported by: advise, compare, projection, report
"""
