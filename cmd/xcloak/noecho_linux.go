package main

import "golang.org/x/sys/unix"

// The requests that read and set a terminal's settings (noEcho).
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)
