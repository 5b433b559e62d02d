// Package doccmd finds the shell commands the project's documents tell a
// reader to run, in ```sh blocks and in `inline code`, so that tests can
// hold them to the commands they name: a flag renamed or a subcommand
// dropped then fails a test rather than an operator who copies the line.
//
// It reads shell as the documents write it, not as a shell would: line
// continuations are joined, quotes removed, pipes and && split commands,
// and placeholders ($VAR, "$(...)", ..., UPPER-CASE words) are kept as
// written for the checks to recognise.
package doccmd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Files are the documents whose commands are checked, as globs from the
// repository's root. CHANGELOG.md is left out: it is history, and names
// what commands were, not what they are.
var Files = []string{"README.md", "docs/*.md", "examples/*/README.md", "deploy/*/README.md"}

// Command is one simple command of a document: no pipes, no &&, no
// redirections, no assignments before it.
type Command struct {
	File string // from the repository's root
	Line int    // where the command's logical line starts
	// Words are the command's words, quotes removed, its program first.
	Words []string
	// Comment is the shell comment after the command, with the indented
	// comment lines that continue it: prose, which may name flags.
	Comment string
}

func (c Command) String() string {
	return fmt.Sprintf("%s:%d: %s", c.File, c.Line, strings.Join(c.Words, " "))
}

// Args reports whether c runs program, as program, bin/program,
// ./program, /program (in a container: docker compose exec SERVICE
// /program) or go run ./cmd/program, and returns the words after it.
// A build of another version (bin/program-before) is not program.
func (c Command) Args(program string) ([]string, bool) {
	w := c.Words
	for i := range w {
		switch {
		case i == 0 && (w[i] == program || w[i] == "bin/"+program || w[i] == "./bin/"+program || w[i] == "./"+program):
			return w[i+1:], true
		case w[i] == "/"+program:
			return w[i+1:], true
		case i == 0 && len(w) >= 3 && w[0] == "go" && w[1] == "run" && strings.TrimSuffix(w[2], "/") == "./cmd/"+program:
			return w[3:], true
		}
	}
	return nil, false
}

// CommentFlags returns the --flags c's comment names, such as
// "(--before URL: a second server)", without their dashes.
func (c Command) CommentFlags() []string {
	var flags []string
	for _, m := range commentFlag.FindAllStringSubmatch(c.Comment, -1) {
		if !slices.Contains(flags, m[1]) {
			flags = append(flags, m[1])
		}
	}
	return flags
}

var commentFlag = regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9-]*)`)

// IsPlaceholder reports whether word stands for a value the reader
// supplies rather than being one: a shell variable or command's output
// ($KEY, "$(openssl rand -hex 32)"), an elision (xck_..., …) or a name in
// capitals (PREFIX, N, URL).
func IsPlaceholder(word string) bool {
	if strings.Contains(word, "$") || strings.Contains(word, "...") || strings.Contains(word, "…") {
		return true
	}
	return upperName.MatchString(word)
}

var upperName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// Find returns the commands of the documents Files lists under root, in
// the order they appear.
func Find(root string) ([]Command, error) {
	var cmds []Command
	for _, glob := range Files {
		paths, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return nil, err
			}
			found, err := findInFile(path, filepath.ToSlash(rel))
			if err != nil {
				return nil, err
			}
			cmds = append(cmds, found...)
		}
	}
	return cmds, nil
}

func findInFile(path, name string) ([]Command, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return parseMarkdown(lines, name), nil
}

// shellFences are the info strings of the code blocks read as commands;
// other blocks show output, configuration or code.
var shellFences = []string{"sh", "shell", "bash", "console"}

// parseMarkdown returns the commands of a document's lines: every line of
// a shell block, and every inline code span outside the blocks.
func parseMarkdown(lines []string, file string) []Command {
	var cmds []Command
	inBlock, shell := false, false
	lastLineCmds := 0 // commands of the previous logical line of the block
	var vars map[string]string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				inBlock = false
			} else {
				inBlock, shell = true, slices.Contains(shellFences, strings.TrimSpace(strings.TrimPrefix(trimmed, "```")))
				lastLineCmds = 0
				vars = make(map[string]string)
			}
			continue
		}
		if inBlock {
			if !shell {
				continue
			}
			start := i
			for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
				i++
				line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
			}
			if strings.HasPrefix(trimmed, "#") {
				// An indented comment line continues the comment of the
				// command above it.
				if lastLineCmds > 0 && strings.TrimLeft(line, " \t") != line {
					c := &cmds[len(cmds)-1]
					c.Comment += " " + strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))
				} else {
					lastLineCmds = 0
				}
				continue
			}
			found := parseLine(line, file, start+1, vars)
			cmds = append(cmds, found...)
			lastLineCmds = len(found)
			continue
		}
		for _, span := range inlineCode.FindAllStringSubmatch(line, -1) {
			cmds = append(cmds, parseLine(span[1], file, i+1, nil)...)
		}
	}
	return cmds
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// parseLine splits a logical line into its simple commands; the comment
// at its end goes with the last of them. vars holds the variables the
// block set before the line: a line of assignments alone sets them, and
// an unquoted $NAME of one is its words, as the shell splits it. Other
// variables stay as written. vars may be nil, for inline code.
func parseLine(line, file string, lineNo int, vars map[string]string) []Command {
	var (
		cmds    []Command
		words   []string
		word    strings.Builder
		inWord  bool
		quoted  bool // some of the word was quoted
		quote   rune // the quote the word is in, or 0
		parens  int  // depth of $( ... ) outside single quotes
		bracket int  // depth of [ ... ] of a synopsis
		comment string
	)
	endWord := func() {
		w := word.String()
		switch value, ok := vars[strings.TrimPrefix(w, "$")]; {
		case !inWord:
		case !quoted && strings.HasPrefix(w, "$") && ok:
			words = append(words, strings.Fields(value)...)
		default:
			words = append(words, w)
		}
		word.Reset()
		inWord, quoted = false, false
	}
	endCommand := func() {
		endWord()
		if c, ok := simpleCommand(words); ok {
			cmds = append(cmds, Command{File: file, Line: lineNo, Words: c})
		} else if vars != nil {
			for _, w := range words {
				name, value, _ := strings.Cut(w, "=")
				vars[name] = value
			}
		}
		words = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case quote == '"' && r == '"' && parens == 0:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote, inWord, quoted = r, true, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			parens++
			word.WriteString("$(")
			inWord = true
			i++
		case parens > 0 && r == ')':
			parens--
			word.WriteRune(r)
		case quote != 0 || parens > 0:
			word.WriteRune(r)
		case r == '#' && !inWord:
			comment = strings.TrimSpace(string(rs[i+1:]))
			i = len(rs)
		case r == ' ' || r == '\t':
			endWord()
		case r == '[' && !inWord:
			bracket++
		case r == ']' && bracket > 0:
			bracket--
			endWord()
		case r == '|' && bracket > 0 && !inWord:
			// An alternative of a synopsis: [--limit N | --all] holds
			// both flags, which the check parses together.
		case r == '|' && !inWord, r == ';', r == '&' && (i == 0 || rs[i-1] != '>'):
			endCommand()
			for i+1 < len(rs) && (rs[i+1] == '|' || rs[i+1] == '&') {
				i++
			}
		case r == '|':
			word.WriteRune(alternative)
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endCommand()
	if comment != "" && len(cmds) > 0 {
		cmds[len(cmds)-1].Comment = comment
	}
	return expandAlternatives(cmds)
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// simpleCommand drops the assignments before a command, its redirections
// and its elisions; ok is false when no command is left.
func simpleCommand(words []string) (_ []string, ok bool) {
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "..." || w == "…":
		case w == ">" || w == ">>" || w == "<" || w == "2>":
			i++ // and the file
		case strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>"):
		default:
			out = append(out, w)
		}
	}
	return out, len(out) > 0
}

// alternative stands for an unquoted | inside a word, which no pipe is.
const alternative = '\x00'

// expandAlternatives makes one command of each alternative of a word
// such as add|unlock|sign-out, as prose writes several subcommands at
// once; a quoted | (-bench 'a|b') is the word's own.
func expandAlternatives(cmds []Command) []Command {
	var out []Command
	for _, c := range cmds {
		i := slices.IndexFunc(c.Words, func(w string) bool { return strings.ContainsRune(w, alternative) })
		if i < 0 {
			out = append(out, c)
			continue
		}
		for alt := range strings.SplitSeq(c.Words[i], string(alternative)) {
			d := c
			d.Words = slices.Concat(c.Words[:i], []string{alt}, c.Words[i+1:])
			out = append(out, expandAlternatives([]Command{d})...)
		}
	}
	return out
}
