from flower.cli import main

main()
