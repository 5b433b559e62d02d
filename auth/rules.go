package auth

import "net/netip"

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

// networkID names addr's network of v4Bits or v6Bits: "192.0.2.1" for a
// whole IPv4 address, "2001:db8::/64" or "192.0.2.0/24" for a network, and
// "unknown" for no address. An IPv4-mapped IPv6 address counts as IPv4, so
// one client has one name whichever socket it came through; a single IPv6
// subscriber is routinely handed a whole /64, which it could otherwise
// rotate through.
func networkID(addr netip.Addr, v4Bits, v6Bits int) string {
	if !addr.IsValid() {
		return "unknown"
	}
	addr = addr.Unmap().WithZone("")
	bits := v6Bits
	if addr.Is4() {
		bits = v4Bits
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return "unknown"
	}
	if addr.Is4() && bits == 32 {
		return p.Addr().String()
	}
	return p.String()
}
