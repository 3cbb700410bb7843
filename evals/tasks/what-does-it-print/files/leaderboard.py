import csv

with open("scores.csv", newline="") as f:
    rows = list(csv.DictReader(f))

totals = {}
for row in rows:
    # the worst round does not count
    rounds = sorted(int(row[key]) for key in ("round1", "round2", "round3"))
    totals[row["name"]] = sum(rounds[1:])

ranking = sorted(totals.items(), key=lambda item: -item[1])
winner, best = ranking[0]
print(f"winner: {winner} with {best} points")
print(f"field average: {sum(totals.values()) / len(totals):.1f}")
