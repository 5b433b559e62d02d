//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import "errors"

// noEcho is not done here: promptPassword falls back to term.ReadPassword.
func noEcho(int) (func(), error) { return nil, errors.ErrUnsupported }
