import sys

counts = {}
for line in open(sys.argv[1]):
    for word in line.split():
        counts[word] = counts.get(word, 0) + 1

pairs = counts.items()
pairs.sort(lambda a, b: cmp(b[1], a[1]) or cmp(a[0], b[0]))
for word, count in pairs:
    print "%s %d" % (word, count)
