package auth

// signInRules are the rules that reject sign-ins: their rejections are
// sign-in attempts too, and make up Summary.Rejected.
var signInRules = []string{RuleLoginIP, RuleLoginAccount, RuleLoginDevice, RuleLockout}

// RejectionRules lists every rule a rejection can name, sign-in rules
// first, in the order the dashboard shows them.
func RejectionRules() []string {
	return append(append([]string{}, signInRules...), RuleResetIP, RuleResetAccount, RuleResetConfirmIP)
}

// IsSignInRule reports whether rule rejects sign-ins (rather than resets).
func IsSignInRule(rule string) bool {
	for _, r := range signInRules {
		if r == rule {
			return true
		}
	}
	return false
}
