"""Put this directory first on PYTHONPATH and `import hpsearch` fails: proves that what runs
does not need the hpsearch app."""

raise ImportError("hpsearch is made unimportable for this test: nothing here may import it")
