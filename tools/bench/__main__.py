from tools.bench.cli import main

main()
