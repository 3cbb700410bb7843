from billing import calc_total

if __name__ == "__main__":
    print(calc_total([10, 20, 12.5], tax_rate=0.1))
