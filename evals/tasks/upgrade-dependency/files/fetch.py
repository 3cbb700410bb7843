import sys

import requests


def main(url):
    response = requests.get(url, timeout=10)
    response.raise_for_status()
    print(response.text[:200])


if __name__ == "__main__":
    main(sys.argv[1])
