package auth_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestRecoveryCodesAtOnceSpendOne: several right recovery codes sent at
// once to one second step (a double submit of a form filled twice, say)
// sign in once and spend one code: a code is spent only with the step
// it finishes, so the answers that find the step gone leave theirs
// unspent. Before, each spent its code and all but one were then refused,
// four codes lost for one sign-in.
func TestRecoveryCodesAtOnceSpendOne(t *testing.T) {
	const answers = 5
	f := newFixture(t, nil)
	ctx := t.Context()
	f.addUser(t, "ann@example.com", "password123", false)
	res, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7")})
	if err != nil {
		t.Fatal(err)
	}
	_, codes := confirmTOTP(t, f, res)
	step, err := f.svc.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "password123", Client: client("192.0.2.7"),
		DeviceCookie: res.Device.Value})
	if !errors.Is(err, auth.ErrMFARequired) {
		t.Fatalf("sign-in of an account with a factor: %v, want ErrMFARequired", err)
	}
	errs := make([]error, answers)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			_, errs[i] = f.svc.SecondStep(ctx, auth.SecondStepRequest{Token: step.MFA.Token, Binding: step.MFA.Binding,
				Code: codes[i], Client: client("192.0.2.7"), Cookie: func(string) string { return res.Device.Value }})
		})
	}
	wg.Wait()
	signedIn := 0
	for i, err := range errs {
		switch {
		case err == nil:
			signedIn++
		case errors.Is(err, auth.ErrInvalidToken):
		default:
			t.Errorf("answer %d: %v, want signed in or the step gone", i, err)
		}
	}
	var left int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM recovery_codes WHERE used_at IS NULL`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if signedIn != 1 || left != len(codes)-1 {
		t.Errorf("%d right recovery codes at once: %d signed in, %d of %d codes left; want 1 and %d",
			answers, signedIn, left, len(codes), len(codes)-1)
	}
}
