import os
import sys
import json
import re
from collections import Counter, defaultdict
from datetime import datetime


def main(path):
    with open(path) as f:
        orders = json.load(f)
    counts = Counter(order["product"] for order in orders)
    for product, n in counts.most_common():
        print(f"{product}: {n}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "orders.json")
