package doccmd

import "testing"

// CheckAll holds every command of program that the documents under root
// show to program's own parsing (Check), reporting each failure on t, and
// fails t if the documents show none: a test of a program's documented
// commands calls it with a Parser that runs the program.
func CheckAll(t testing.TB, root, program string, parse Parser) {
	t.Helper()
	cmds, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cmds {
		args, ok := c.Args(program)
		if !ok {
			continue
		}
		n++
		for _, err := range Check(c, args, parse) {
			t.Errorf("%s\n\t%v", c, err)
		}
	}
	if n == 0 {
		t.Fatalf("the documents show no %s command", program)
	}
}
