from tritonctl.cli.app import main

main()
