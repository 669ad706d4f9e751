"""tests/verdict.py: how the checks of the tree (check_labels, check_layers,
check_dead, check_sizes) report: one line with what was checked, what was
expected and how many breaches there were, then each breach; the exit
status 1 when there is one."""


def verdict(checked, expected, bad):
    print(f"{checked}; expected {expected}; got {len(bad)}")
    for b in bad:
        print("  " + b)
    return 1 if bad else 0
