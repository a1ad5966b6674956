"""The race directors' admin API, one router per capability (``functions/admin_api`` includes
them): races, window, stats, fairness, runners, questions, codes, audit; ``common`` holds what
every route needs (the calling director, their race, the JSON answer)."""
