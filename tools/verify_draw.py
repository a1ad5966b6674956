"""Re-compute a Racecap ballot from what the race page published; Python 3 alone, nothing else.

    python3 verify_draw.py --seed SEED --commitment SHA256 --places 1000 list.csv > drawn.csv

list.csv is the published list: a header "ticket,size", then one row per ticket (an application
id with 1, or a group's id with its size; never an address). Prints every ticket in drawn order
with "won" or "waitlist". Refuses (exit 1) a seed whose SHA-256 is not the commitment.
"""

import argparse
import csv
import hashlib
import hmac
import sys


def main() -> None:
    cli = argparse.ArgumentParser(description="Re-compute a Racecap ballot's order and winners.")
    cli.add_argument("--seed", required=True, help="the revealed seed: 64 hex digits (32 bytes)")
    cli.add_argument("--commitment", required=True, help="the SHA-256 published before the window")
    cli.add_argument("--places", required=True, type=int)
    cli.add_argument("list", help="the published list (CSV: ticket,size)")
    args = cli.parse_args()
    try:
        seed = bytes.fromhex(args.seed)  # the key and the committed bytes are the 32 bytes, not the text
    except ValueError:
        sys.exit("REFUSED: a seed is 64 hex digits")
    if hashlib.sha256(seed).hexdigest() != args.commitment.strip().lower():
        sys.exit("REFUSED: this seed's SHA-256 is not the published commitment")
    with open(args.list, newline="", encoding="utf-8") as f:
        tickets = [(row["ticket"], int(row["size"])) for row in csv.DictReader(f)]
    # Drawn order: HMAC-SHA256(key=seed, message=the id in UTF-8), ascending; ties by the id.
    tickets.sort(key=lambda t: (hmac.new(seed, t[0].encode(), hashlib.sha256).hexdigest(), t[0]))
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["drawn", "ticket", "size", "result"])
    left = args.places
    for drawn, (ticket, size) in enumerate(tickets, 1):
        won = size <= left  # a group larger than the places left waits whole; later ones may fit
        left -= size if won else 0
        out.writerow([drawn, ticket, size, "won" if won else "waitlist"])


if __name__ == "__main__":
    main()
