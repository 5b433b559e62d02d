package authtest_test

import (
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

func TestMemoryStore(t *testing.T) {
	authtest.TestStore(t, func(*testing.T) auth.Store { return authtest.NewStore() })
}
