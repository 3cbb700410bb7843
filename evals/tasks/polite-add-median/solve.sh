cat >> scores.py <<'PY'


def median(values):
    """The middle score (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
PY
python3 -m unittest -q test_scores
