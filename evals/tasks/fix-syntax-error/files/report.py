items = {"apples": 3, "pears": 5, "plums": 2}


def report(stock)
    lines = []
    for name, count in sorted(stock.items()):
        lines.append(f"{name}: {count}")
    return "\n".join(lines)


print(report(items))
