python3 - <<'PY'
src = open("greet.py").read()
src = src.replace('    parser.add_argument("--name", default="world")\n',
                  '    parser.add_argument("--name", default="world")\n    parser.add_argument("--shout", action="store_true")\n')
src = src.replace('    print(message)\n', '    print(message.upper() if args.shout else message)\n')
open("greet.py", "w").write(src)
PY
