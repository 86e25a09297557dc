"""One module per `driver` command: NAME, add(subparsers) and main(args) -> exit code."""
