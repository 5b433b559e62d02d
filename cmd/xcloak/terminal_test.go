package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUserAddAtATerminalHidesThePassword: typed at a terminal (a real
// pseudo-terminal here), the password is not echoed: it would stay on the
// screen and in the scrollback. From /dev/null, no terminal, there is no
// prompt, only the refusal of an empty password.
func TestUserAddAtATerminalHidesThePassword(t *testing.T) {
	vars := storeSettings(t)
	master, tty := openPTY(t)
	const password = "correct horse battery staple"
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), []string{"xcloak", "user", "add", "--email", "ann@example.com"}, environ(vars), tty, &stdout, &stderr)
	}()
	// Typed once the terminal stops echoing, as a person would type
	// after the prompt.
	waitForEcho(t, tty, false)
	if _, err := master.WriteString(password + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("user add: %v\nstderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Password for ann@example.com (not shown): ") {
		t.Errorf("no prompt in stderr %q", stderr.String())
	}
	// What the terminal showed: no password.
	if err := master.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	shown := make([]byte, 4096)
	n, _ := master.Read(shown)
	if strings.Contains(string(shown[:n]), "horse") {
		t.Errorf("the terminal showed the password: %q", shown[:n])
	}
	if tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS); err != nil || tio.Lflag&unix.ECHO == 0 {
		t.Errorf("the terminal does not echo again after the command: %v", err)
	}
	if resp := signIn(t, startServe(t, vars).base, "ann@example.com", password); resp.StatusCode != 200 {
		t.Errorf("sign-in with the password typed: %d", resp.StatusCode)
	}

	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stderr.Reset()
	err = run(t.Context(), []string{"xcloak", "user", "add", "--email", "bob@example.com"}, environ(vars), null, &stdout, &stderr)
	if err == nil || strings.Contains(stderr.String(), "Password for") {
		t.Errorf("from /dev/null: %v, stderr %q; want a refusal and no prompt", err, stderr.String())
	}
}

// openPTY opens a pseudo-terminal: master is its other end, where what
// is typed is written and what is shown is read; tty is the terminal.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	// Non-blocking, so that os.NewFile makes it pollable and its reads
	// take a deadline.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	// Unlocked and numbered on the raw descriptor: File.Fd would make it
	// blocking again.
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// TestUserAddInterruptedAtThePrompt: Ctrl-C (the command's context ends)
// at the prompt ends user add at once and gives the terminal its echo
// back; a second Ctrl-C would otherwise end the process with echo off.
func TestUserAddInterruptedAtThePrompt(t *testing.T) {
	vars := storeSettings(t)
	_, tty := openPTY(t)
	ctx, interrupt := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"xcloak", "user", "add", "--email", "ann@example.com"}, environ(vars), tty, &stdout, &stderr)
	}()
	waitForEcho(t, tty, false)
	interrupt()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("user add after Ctrl-C: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second): // a bound on a hang: a loaded machine may take seconds
		t.Fatal("user add still waits for the password 30s after Ctrl-C")
	}
	waitForEcho(t, tty, true)
}

// waitForEcho waits up to 30 s, a bound on a hang that a loaded machine
// does not reach, for tty to echo what is typed, or not.
func waitForEcho(t *testing.T, tty *os.File, on bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if (tio.Lflag&unix.ECHO != 0) == on {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal's echo is not %t after 30s", on)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPromptInterruptedBeforeItBegins: Ctrl-C (or a shutdown) that came
// before the prompt leaves the terminal as it was: echoing.
func TestPromptInterruptedBeforeItBegins(t *testing.T) {
	_, tty := openPTY(t)
	ctx, interrupt := context.WithCancel(t.Context())
	interrupt()
	if _, err := promptPassword(ctx, tty, io.Discard, "ann@example.com"); !errors.Is(err, context.Canceled) {
		t.Fatalf("promptPassword: %v, want context.Canceled", err)
	}
	time.Sleep(100 * time.Millisecond) // a reader turning the echo off late has had its time
	waitForEcho(t, tty, true)
}
