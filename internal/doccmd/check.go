package doccmd

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A Parser runs a program on args, as its main would with them, and
// returns what it wrote to stderr and the error it returned.
type Parser func(args []string) (stderr string, err error)

// Check holds args, the words of command c after its program, to the
// program's own parsing of them, and each flag c's comment names to the
// subcommand's flags. The program gets --help after the words, so that
// it parses every flag with the subcommand's own flag set and stops
// before it acts: an unknown subcommand, an unknown flag, a value that
// does not parse or a stray argument is an error. A flag whose value is
// a placeholder is left out of the check, which cannot know the value.
func Check(c Command, args []string, parse Parser) []error {
	var errs []error
	if err := checkArgs(args, parse); err != nil {
		errs = append(errs, err)
	}
	for _, flag := range c.CommentFlags() {
		// Prose gives no value, and whether the flag takes one is not
		// known here: given true, a flag that exists parses or fails on
		// its value, and one that does not is not defined.
		stderr, err := parse(slices.Concat(subcommand(args), []string{"--" + flag + "=true"}, help))
		if err != nil && !strings.Contains(stderr, "invalid value \"true\" for flag -"+flag+":") {
			errs = append(errs, fmt.Errorf("its comment names --%s: %s", flag, firstLine(stderr, err)))
		}
	}
	return errs
}

// subcommand returns the words of args before the first flag.
func subcommand(args []string) []string {
	i := slices.IndexFunc(args, func(w string) bool { return strings.HasPrefix(w, "-") })
	if i < 0 {
		return slices.Clone(args)
	}
	return slices.Clone(args[:i])
}

// invalidValue is the flag package's message for a value its flag's type
// refuses.
var invalidValue = regexp.MustCompile(`invalid value ("(?:[^"\\]|\\.)*") for flag -([\w-]+)`)

// help ends the arguments of every check. Twice, because a flag at the
// end whose value the document elides takes the first one as its value:
// the second still stops the command before it acts.
var help = []string{"--help", "--help"}

// missingAbsFile is a flag's error for a file outside the repository
// that is not there, which the document has the reader make (git show
// REV:FILE > /tmp/before.lua): files in the repository must be there.
var missingAbsFile = regexp.MustCompile(`open /\S*: no such file or directory`)

func checkArgs(args []string, parse Parser) error {
	args = slices.Clone(args)
	for {
		stderr, err := parse(slices.Concat(args, help))
		if err == nil {
			return nil
		}
		m := invalidValue.FindStringSubmatch(stderr)
		if m == nil {
			return errors.New(firstLine(stderr, err))
		}
		value, uerr := strconv.Unquote(m[1])
		if uerr != nil || !(IsPlaceholder(value) || value == "--help" || missingAbsFile.MatchString(stderr)) {
			return errors.New(firstLine(stderr, err))
		}
		i := flagIndex(args, m[2], value)
		if i < 0 {
			return errors.New(firstLine(stderr, err))
		}
		if strings.Contains(args[i], "=") || i+1 == len(args) {
			args = slices.Delete(args, i, i+1)
		} else {
			args = slices.Delete(args, i, i+2)
		}
	}
}

// flagIndex returns where args gives flag name the value, as -name value,
// --name value, -name=value or --name=value; a value of --help is the
// one the check appended, after a flag at the end.
func flagIndex(args []string, name, value string) int {
	for i, w := range args {
		if w != "-"+name && w != "--"+name {
			if w == "-"+name+"="+value || w == "--"+name+"="+value {
				return i
			}
			continue
		}
		if i+1 < len(args) && args[i+1] == value || i+1 == len(args) && value == "--help" {
			return i
		}
	}
	return -1
}

func firstLine(stderr string, err error) string {
	if line, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n"); line != "" {
		return line
	}
	return err.Error()
}
