"""Owns: one module per subcommand (HELP, DESCRIPTION, EPILOG, add_arguments, run): parse the
settings, call one library function, render.
May import: any room below it (the features, train, strategies and the base rooms)
Imported by: nothing statically (cli loads each command's module by its name)
"""
