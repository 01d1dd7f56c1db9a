"""One module per `dpwise` subcommand: HELP, DESCRIPTION, EPILOG, add_arguments(p), run(args)."""
