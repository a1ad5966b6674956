"""The benchmark: every figure measured in ONE run on this machine -> reports/bench.json.

    make bench
    RUNNERS=6000 make bench                   # a bigger full-flow burst
    python -m tools.bench --help

(e) each handler's cold-start import, in a fresh interpreter per sample (before anything
    else starts, so the machine is as quiet as it gets);
(a) the raw limit: conditional writes per second DynamoDB Local takes here, from several
    processes x threads of lightweight keep-alive HTTP clients (conditional PutItem of new
    items and conditional UpdateItem of counters, as the hot path does), plus the same
    for two-item TransactWriteItems;
(b) the full flow: an opening burst through Artillery against the local stack (race page,
    hold, form, register and pay, waiting screen until CONFIRMED), its registrations per
    second and estimated hourly registrations (the paper's formula), audited;
(c) (b) as a fraction of what (a) allows: (a) / DynamoDB write requests per registration;
(d) AWS calls per registration by service and operation, COUNTED in the gateway and
    pollers processes (``tools/awscalls.py``), and the cost per 1,000 registrations at
    PRODUCT.md's prices;
(f) the idle monthly cost of a stage, line by line from the synthesized template;
plus CPU seconds per registration by process (what bounds the figure on two cores).

The package, one room per job:

    sections.py         Section and Bench; the registry (a new section: a module + one line)
    coldstart.py        (e)
    raw.py              (a)
    flow.py             (b), (b'), (c), CPU by process, what bounds it
    costs.py            (d) per registration, PRODUCT.md's prices
    idle_cost.py        (f) fixed monthly costs of the synthesized template
    cpu.py              CPU seconds by process group (/proc)
    gateway_profile.py  cProfile of the gateway's share of a registration
    run.py              one run: the phases, the stack, the bursts, the report's assembly
    cli.py              the command line and the printed figures
"""
