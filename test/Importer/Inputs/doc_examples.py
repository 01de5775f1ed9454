#!/usr/bin/env python3
"""Keeps the examples of docs/dialect.md honest (see dialect-doc-examples.test).

    doc_examples.py extract DOC            every ```mlir block of DOC, as one
                                           file for --split-input-file
    doc_examples.py compare WRITTEN PRINTED
                                           each example is what parallax-opt
                                           prints for it, up to SSA value names,
                                           whitespace and comments
    doc_examples.py ops DOC TD...          every op the .td files define has
                                           an example
"""
import re
import sys

SPLIT = "// -----"


def blocks(doc):
    text = open(doc).read()
    found = re.findall(r"^```mlir\n(.*?)^```$", text, re.M | re.S)
    if not found:
        sys.exit(f"{doc}: no ```mlir examples")
    return found


def normalize(chunk):
    """Tokens of one example: comments dropped, the implicit module the
    printer adds removed, every SSA name replaced by %."""
    lines = [l for l in chunk.splitlines() if not l.strip().startswith("//")]
    text = " ".join(" ".join(lines).split())
    if text.startswith("module { ") and text.endswith(" }"):
        text = text[len("module { "):-2]
    text = re.sub(r"%[A-Za-z0-9_$.#-]+", "%", text)
    # Line breaks inside an op's types and operand lists are layout, not
    # syntax: drop the spaces next to punctuation.
    text = re.sub(r"\s*([,:(){}\[\]<>=])\s*", r"\1", text)
    return text


def main(argv):
    if len(argv) >= 3 and argv[1] == "extract":
        print(f"\n{SPLIT}\n".join(b.rstrip("\n") for b in blocks(argv[2])))
    elif len(argv) == 4 and argv[1] == "compare":
        written = open(argv[2]).read().split(SPLIT)
        printed = open(argv[3]).read().split(SPLIT)
        if len(written) != len(printed):
            sys.exit(f"{len(written)} examples written, {len(printed)} printed")
        bad = 0
        for i, (w, p) in enumerate(zip(written, printed)):
            if normalize(w) != normalize(p):
                bad += 1
                print(f"example {i + 1} is not in the printed form:\n"
                      f"--- written\n{w.strip()}\n--- printed\n{p.strip()}\n")
        if bad:
            sys.exit(f"{bad} of {len(written)} examples differ from the printed form")
    elif len(argv) >= 4 and argv[1] == "ops":
        examples = "\n".join(blocks(argv[2]))
        missing = []
        for td in argv[3:]:
            text = open(td).read()
            for m in re.finditer(r'^def Px_\w+Op\s*:\s*Px_\w+<"(\w+)"', text, re.M):
                if not re.search(r"\bpx\." + m.group(1) + r"\b", examples):
                    missing.append(f"px.{m.group(1)} ({td})")
        if missing:
            sys.exit("ops without an example in the dialect doc:\n  " +
                     "\n  ".join(missing))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
