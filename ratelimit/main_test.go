package ratelimit_test

import (
	"testing"

	"github.com/xcloak/xcloak/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
