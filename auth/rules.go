package auth

// Rule names: they appear in Redis keys, in events and on the dashboard.
const (
	RuleLoginIP        = "login_ip"
	RuleLoginAccount   = "login_account"
	RuleLoginDevice    = "login_device"
	RuleResetIP        = "reset_ip"
	RuleResetAccount   = "reset_account"
	RuleResetConfirmIP = "reset_confirm_ip"
	// RuleResetDomain limits the reset mails sent to one recipient domain.
	RuleResetDomain = "reset_domain"
)

// Rule names of the unlock links.
const (
	RuleUnlockIP        = "unlock_ip"
	RuleUnlockAccount   = "unlock_account"
	RuleUnlockConfirmIP = "unlock_confirm_ip"
)
