import csv
import sys


def main(command, path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if command == "head":
        for row in rows[:11]:
            print(",".join(row))
    elif command == "count":
        print(len(rows) - 1)
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
