"""Race results (RunSignUp paper §6.2): directors upload a CSV, runners browse and search.

    sheet.py     the CSV: every line checked, every problem reported with its line number
    ranking.py   overall, gender and age-group places (ties share a place; DNF/DNS/DQ get none)
    dataset.py   one immutable version in memory: pages, filters, a runner, autocomplete
    store.py     DynamoDB (pointer, uploads, versions in compressed chunks) and S3 (the files)
    service.py   the use cases: upload, process, publish, and the public reads through the cache
    models.py    the API's shapes

Pure modules (sheet, ranking, dataset) import nothing from AWS, so they are tested alone.
"""
