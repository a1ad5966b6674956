"""Artillery burst tests against the local stack (default) or a deployed stage.

    make burst                                   # 450 runners in 30 s, local stack, report
    RUNNERS=5000 THINK_MAX=20 make burst
    SCENARIO=oversubscribed make burst           # 5x more runners than places
    SCENARIO=race-page make burst                # read burst on the race page
    PROVIDER_RATE=5 make burst                   # the Stripe stand-in at 5 requests/s: runners meet its limit
    SCENARIO=bots make burst                     # a token bot, an address bot, honest runners
    SCENARIO=chaos make burst                    # the opening burst with faults (tools/burst/chaos.py)
    make burst SCENARIO=opening-queue            # 2,000 runners queue in the 5 min before the opening
    TARGET=https://d123.cloudfront.net RACE_ID=race_... make burst   # a deployed stage

    python -m tools.burst --help                 # every knob, each also an env variable

Locally it starts a dedicated stack on free ports in a temporary folder (nothing else is
touched), seeds a race, warms the functions up and checks one registration end to end
(the paper's "initial registration test"), runs the Artillery scenario with a progress
line, waits for the queues to drain, runs the post-burst audit (``tools/audit.py``) and
writes ``reports/burst-<timestamp>.html``. A failed ``ensure`` threshold or an audit
violation fails the run (exit status 1).

Against ``TARGET`` it skips everything local: no seeding (give ``RACE_ID``), no audit
(run ``python -m tools.audit`` where the backend is reachable); the report is built
from what the runners saw.

The package, one room per job:

    config.py     BurstConfig, BurstResult, Scenario (and its hooks), BurstRun
    scenarios.py  the registry: a new scenario is one module plus one line there
    chaos.py      the chaos scenario: kills and restarts servers, injects DynamoDB faults
    bots.py       the bots scenario: per-device and per-address hold limits
    opening_queue.py  the opening-queue scenario: lottery before the opening, FIFO after
    stack.py      the local stack: start, seed, queue depth, drain, audit, confirmations
    warm.py       warm the functions and JVMs; the initial registration test
    artillery.py  run Artillery with the scenario's overrides; progress; `ensure` verdicts
    summary.py    the figures from the runners' outcomes and the tables
    provider.py   the Stripe stand-in's limit during the burst, and the calls it counted
    run.py        run_burst: one whole burst, hooks included
    cli.py        the command line and the printed figures
"""

# The docstring only (it is `python -m tools.burst --help`'s text). Import what you need from
# its module (tools.burst.config, .run, .stack …): this __init__ runs before every one of
# them, so it re-exports nothing (a re-export made it import run, which imports the
# scenarios, which import config: a circle).
