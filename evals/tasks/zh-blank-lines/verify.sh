python3 - <<'PY' || exit 1
import sys
want = ["周会记录 2024-03-12", "", "参会：王磊、李娜、陈晨", "", "议题一：发布计划", "- 周五冻结代码",
        "- 下周一发布 1.4 版本", "", "议题二：测试", "- 补充登录模块的单元测试", "- 修复 CI 偶发失败", "",
        "待办：", "- 王磊：整理发布说明", "- 李娜：修复 #212"]
text = open("notes.txt", encoding="utf-8").read()
lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
if lines != want:
    print("notes.txt is now:", lines); sys.exit(1)
PY
