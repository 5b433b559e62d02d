//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import "golang.org/x/sys/unix"

// noEcho turns off the echo of what is typed at the terminal fd, lines
// still read whole, and returns what turns it back on. It does so in the
// caller's goroutine, unlike term.ReadPassword, so that a caller giving
// up on the read (Ctrl-C) restores the echo after it was turned off,
// never before.
func noEcho(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	t.Lflag |= unix.ICANON | unix.ISIG
	t.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
