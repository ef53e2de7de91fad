from hpsearch.app import main

main()
