import sys

a, b = (int(x) for x in sys.argv[1:3])
checksum = (a * 31 + b * 17) % 97
print(f"product={a * b} checksum={checksum}")
