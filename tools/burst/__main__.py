from tools.burst.cli import main

main()
