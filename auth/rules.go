package auth

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/xcloak/xcloak/ratelimit"
)

// Rule names: they appear in Redis keys, in events, in metrics, in the
// settings' names and on the dashboard.
const (
	RuleLoginIP        = "login_ip"
	RuleLoginAccount   = "login_account"
	RuleLoginDevice    = "login_device"
	RuleLoginNetwork   = "login_network" // IPv4 /24, IPv6 /56
	RuleLoginSite      = "login_site"    // IPv6 /48
	RuleResetNetwork   = "reset_network" // IPv4 /24, IPv6 /56
	RuleResetSite      = "reset_site"    // IPv6 /48
	RuleResetIP        = "reset_ip"
	RuleResetAccount   = "reset_account"
	RuleResetConfirmIP = "reset_confirm_ip"
	// The reset links' ladder: IPv4 /24 or IPv6 /56, and IPv6 /48.
	RuleResetConfirmNetwork = "reset_confirm_network"
	RuleResetConfirmSite    = "reset_confirm_site"
	// RuleResetDomain limits the reset mails sent to one recipient domain.
	RuleResetDomain = "reset_domain"
	// RuleLoginPassword holds a password sprayed over many accounts.
	RuleLoginPassword = "login_password"
	// RuleVerifyMailAccount limits the mails of held sign-ins to one
	// account, so that a leaked password cannot flood its owner's mailbox.
	RuleVerifyMailAccount = "verify_mail_account"
	// RuleNoticeAccount limits the notices mailed to an account's owner,
	// per kind: of sign-ins from new devices, of password changes, of
	// second factors.
	RuleNoticeAccount = "notice_account"
)

// Rule names of the unlock links.
const (
	RuleUnlockIP        = "unlock_ip"
	RuleUnlockNetwork   = "unlock_network"
	RuleUnlockSite      = "unlock_site"
	RuleUnlockAccount   = "unlock_account"
	RuleUnlockConfirmIP = "unlock_confirm_ip"
	// The unlock links' ladder: IPv4 /24 or IPv6 /56, and IPv6 /48.
	RuleUnlockConfirmNetwork = "unlock_confirm_network"
	RuleUnlockConfirmSite    = "unlock_confirm_site"
)

// RuleVerifyConfirmIP limits the links that finish a sign-in held for
// new-device verification, confirmed per client network.
const (
	RuleVerifyConfirmIP = "verify_confirm_ip"
	// The sign-in links' ladder: IPv4 /24 or IPv6 /56, and IPv6 /48.
	RuleVerifyConfirmNetwork = "verify_confirm_network"
	RuleVerifyConfirmSite    = "verify_confirm_site"
)

// RuleAccountIP limits what a signed-in owner does with the account's
// sessions and devices (listing, ending, forgetting), per account and
// client network.
const RuleAccountIP = "account_ip"

// RuleAPIKeyIP limits the failed API key checks of the decision API per
// client network (apikeys.go).
const RuleAPIKeyIP = "apikey_ip"

// Rule names of the second step of a sign-in (mfa_signin.go): codes
// tried, counted before they are checked, per client network (a rate)
// and per account (in a row, towards a lock of its own), apart from the
// password's.
const (
	RuleMFANetwork = "mfa_ip"
	// RuleMFASite is the network's wider rung, per IPv6 /48.
	RuleMFASite    = "mfa_site"
	RuleMFAAccount = "mfa_account"
)

// RulePasskeyOptionsIP limits the passkey ceremonies begun per client
// network, of passwordless sign-ins, of second steps and of registrations:
// each stores a ceremony (passkey_signin.go), so it is counted before
// anything is stored, or a second step's token looked up.
const (
	RulePasskeyOptionsIP = "passkey_options_ip"
	// RulePasskeyOptionsSite is its wider rung, per IPv6 /48.
	RulePasskeyOptionsSite = "passkey_options_site"
)

// RulePasskeyAccount limits the sign-ins with a passkey alone per account,
// once the passkey is verified: as RuleLoginAccount bounds the sessions a
// password makes, this bounds those a passkey makes.
const RulePasskeyAccount = "passkey_account"

// rules is the one table of XCloak's rate limits. Everything else about a
// rule is read from it: the flows' decisions, the limits' defaults and
// validation, the settings (XCLOAK_LIMIT_<NAME>, --limit-<name>) and their
// README rows, the dashboard's labels and sign-in totals, and the stats
// JSON's rule keys. Adding a rule is adding an entry here, and its test.
//
// The order matters: it is the order of a flow's rules in its decision
// (and so of the rule an event names when several refuse), of the
// settings in --help, and of the rules on the dashboard.
var rules = []RuleSpec{
	{
		Name: RuleLoginIP, Label: "Sign-ins per address", Flow: FlowSignIn, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 50, Window: 10 * time.Minute}, Listed: true,
		Usage: "sign-in attempts per client network",
		Doc:   "Sign-in attempts per client network (address, or IPv6 /64).",
	},
	{
		// The ladder's wider rungs: a botnet that spends each address once
		// or twice still crowds into networks. Their defaults leave room for
		// a campus or an office behind one /24 (see docs/SECURITY-MODEL.md).
		Name: RuleLoginNetwork, Label: "Sign-ins per IPv4 /24 or IPv6 /56", Flow: FlowSignIn, Key: KeyNetwork(24, 56),
		Default: ratelimit.Limit{Count: 1000, Window: 10 * time.Minute}, Listed: true,
		Usage: "sign-in attempts per IPv4 /24 or IPv6 /56",
		Doc:   "Sign-in attempts per IPv4 /24 or IPv6 /56, however many addresses of it are used.",
	},
	{
		Name: RuleLoginSite, Label: "Sign-ins per IPv6 /48", Flow: FlowSignIn, Key: KeyIPv6Network(48),
		Default: ratelimit.Limit{Count: 2000, Window: 10 * time.Minute}, Listed: true,
		Usage: "sign-in attempts per IPv6 /48",
		Doc:   "Sign-in attempts per IPv6 /48 (one site's allocation); IPv4 clients are not counted here.",
	},
	{
		Name: RuleLoginAccount, Label: "Sign-ins per account", Flow: FlowSignIn, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 10, Window: 10 * time.Minute}, Lockable: true, Listed: true,
		Usage: "sign-in attempts per account",
		Doc:   "Sign-in attempts per account, existing or not.",
	},
	{
		// A known device is limited and locked on its own and is not held
		// by the account's limit or lockout.
		Name: RuleLoginDevice, Label: "Sign-ins per device", Flow: FlowSignIn, Key: KeyDevice,
		Default: ratelimit.Limit{Count: 10, Window: 10 * time.Minute}, Lockable: true, Replaces: RuleLoginAccount, Listed: true,
		Usage: "sign-in attempts per browser that signed in before",
		Doc: "Sign-in attempts per known device (a browser that signed in to the account before); " +
			"replaces the account limit for it, and its failures lock it alone, by the lockout settings.",
	},
	{
		// Password spraying: one password tried on many accounts, a few
		// tries each, which no per-account rule sees. The rule's lock is
		// the whole verdict (failures of one password on distinct
		// accounts, by the spraying settings, see spraying.go), so it has
		// no limit and keeps no log: a sign-in's decision only reads the
		// password's lock.
		Name: RuleLoginPassword, Label: "Sign-ins with a sprayed password", Flow: FlowSignIn, Key: KeyPassword,
		Lockable: true, LockOnly: true,
	},
	{
		Name: RuleResetIP, Label: "Reset requests per address", Flow: FlowResetRequest, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 5, Window: 10 * time.Minute}, Listed: true,
		Usage: "reset requests per client network",
		Doc:   "Reset requests per client network.",
	},
	{
		Name: RuleResetNetwork, Label: "Reset requests per IPv4 /24 or IPv6 /56", Flow: FlowResetRequest, Key: KeyNetwork(24, 56),
		Default: ratelimit.Limit{Count: 100, Window: 10 * time.Minute}, Listed: true,
		Usage: "reset requests, and apart unlock-link requests and reset, unlock and sign-in links opened or confirmed, per IPv4 /24 or IPv6 /56",
		Doc: "Reset requests per IPv4 /24 or IPv6 /56; unlock-link requests, and reset, unlock and sign-in links opened or confirmed, " +
			"are counted apart under the same limit (each its own count).",
	},
	{
		Name: RuleResetSite, Label: "Reset requests per IPv6 /48", Flow: FlowResetRequest, Key: KeyIPv6Network(48),
		Default: ratelimit.Limit{Count: 200, Window: 10 * time.Minute}, Listed: true,
		Usage: "reset requests, and apart unlock-link requests and reset, unlock and sign-in links opened or confirmed, per IPv6 /48",
		Doc: "Reset requests per IPv6 /48, and unlock-link requests and reset, unlock and sign-in links opened or confirmed, " +
			"each counted apart under the same limit; IPv4 clients are not counted here.",
	},
	{
		Name: RuleResetAccount, Label: "Reset requests per account", Flow: FlowResetRequest, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 3, Window: time.Hour}, Listed: true,
		Usage: "reset requests per account",
		Doc:   "Reset requests per account.",
	},
	{
		Name: RuleResetConfirmIP, Label: "Reset confirmations per address", Flow: FlowResetConfirm, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 20, Window: 10 * time.Minute}, Listed: true,
		Usage: "reset links opened and new passwords set through them, and unlock and sign-in links opened or confirmed, per client network",
		Doc:   "Reset links opened and new passwords set through them, and unlock and sign-in links opened or confirmed, per client network (each its own count).",
	},
	{
		// The reset requests' wider rungs, under their limits, as for
		// unlock-link requests: each confirmation looks a token up, so a
		// /24, or a /48 of many /64s, makes no more of them than it may
		// ask for links.
		Name: RuleResetConfirmNetwork, Label: "Reset confirmations per IPv4 /24 or IPv6 /56", Flow: FlowResetConfirm, Key: KeyNetwork(24, 56),
		SharesLimit: RuleResetNetwork,
	},
	{
		Name: RuleResetConfirmSite, Label: "Reset confirmations per IPv6 /48", Flow: FlowResetConfirm, Key: KeyIPv6Network(48),
		SharesLimit: RuleResetSite,
	},
	{
		// Checked only for the mail of a held sign-in (Subject.Account is
		// set for it alone), which the domain's limit does not count
		// (Service.admitMail).
		Name: RuleVerifyMailAccount, Label: "Sign-in link mails per account", Flow: FlowLinkMail, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 3, Window: 15 * time.Minute},
		Usage:   "mails of held sign-ins (new-device verification) per account",
		Doc: "Mails of sign-ins held for new-device verification per account; past it the sign-in is still answered " +
			"the same (202), and its mail is dropped and counted, so a leaked password cannot flood its owner's mailbox.",
	},
	{
		// The owner's notices are not counted against the domain's limit,
		// which anyone can spend with reset requests (linkJob.ownersNotice);
		// this bounds what one credential can send with them, each kind
		// apart (Subject.Account is "<kind> <account>"). Whoever spends one
		// kind's to silence a later notice has sent the owner as many of
		// that kind first, and spends nothing of the others'.
		Name: RuleNoticeAccount, Label: "Owner notices per account", Flow: FlowNoticeMail, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 20, Window: time.Hour},
		Usage:   "notices to an account's owner mailed per account and kind (new device, password change, second factor)",
		Doc: "Notices mailed to an account's owner per account and kind: of sign-ins from new devices, of password changes, " +
			"of second factors added, removed or their recovery codes made again, each kind counted apart; past it they are " +
			"dropped and counted. They do not count against XCLOAK_LIMIT_RESET_DOMAIN, which anyone can spend with reset requests.",
	},
	{
		// Only mails that would be sent count, so requests for addresses
		// without an account cannot use a domain's limit up.
		Name: RuleResetDomain, Label: "Reset and unlock mails per domain", Flow: FlowLinkMail, Key: KeyDomain,
		Default: ratelimit.Limit{Count: 60, Window: time.Minute},
		Usage:   "reset and unlock-link mails sent per recipient domain",
		Doc: "Reset and unlock-link mails and lockout notices sent per recipient domain (only accounts that exist count); " +
			"past it they are dropped and counted. Held sign-ins' mails and the owner's notices of a new device, a changed password or a second factor are not counted. " +
			"Raise it if most users share one domain.",
	},
	{
		Name: RuleUnlockIP, Label: "Unlock-link requests per address", Flow: FlowUnlockRequest, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 5, Window: 10 * time.Minute},
		Usage:   "unlock-link requests per client network",
		Doc:     `Unlock-link requests ("Locked out? Email me a link") per client network.`,
	},
	{
		// The reset requests' wider rungs, under their limits: each is a
		// lookup and maybe a mail, as a reset request is, so a network of
		// many addresses asks for no more of them.
		Name: RuleUnlockNetwork, Label: "Unlock-link requests per IPv4 /24 or IPv6 /56", Flow: FlowUnlockRequest, Key: KeyNetwork(24, 56),
		SharesLimit: RuleResetNetwork,
	},
	{
		Name: RuleUnlockSite, Label: "Unlock-link requests per IPv6 /48", Flow: FlowUnlockRequest, Key: KeyIPv6Network(48),
		SharesLimit: RuleResetSite,
	},
	{
		Name: RuleUnlockAccount, Label: "Unlock-link requests per account", Flow: FlowUnlockRequest, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 3, Window: time.Hour},
		Usage:   "unlock-link requests per account",
		Doc:     "Unlock-link requests per account, existing or not.",
	},
	{
		Name: RuleUnlockConfirmIP, Label: "Unlock-link confirmations per address", Flow: FlowUnlockConfirm, Key: KeyNetwork(32, 64),
		SharesLimit: RuleResetConfirmIP,
	},
	{
		Name: RuleUnlockConfirmNetwork, Label: "Unlock-link confirmations per IPv4 /24 or IPv6 /56", Flow: FlowUnlockConfirm, Key: KeyNetwork(24, 56),
		SharesLimit: RuleResetNetwork,
	},
	{
		Name: RuleUnlockConfirmSite, Label: "Unlock-link confirmations per IPv6 /48", Flow: FlowUnlockConfirm, Key: KeyIPv6Network(48),
		SharesLimit: RuleResetSite,
	},
	{
		Name: RuleVerifyConfirmIP, Label: "Sign-in link confirmations per address", Flow: FlowVerifyConfirm, Key: KeyNetwork(32, 64),
		SharesLimit: RuleResetConfirmIP,
	},
	{
		Name: RuleVerifyConfirmNetwork, Label: "Sign-in link confirmations per IPv4 /24 or IPv6 /56", Flow: FlowVerifyConfirm, Key: KeyNetwork(24, 56),
		SharesLimit: RuleResetNetwork,
	},
	{
		Name: RuleVerifyConfirmSite, Label: "Sign-in link confirmations per IPv6 /48", Flow: FlowVerifyConfirm, Key: KeyIPv6Network(48),
		SharesLimit: RuleResetSite,
	},
	{
		// Per account as well as network: another account signed in
		// behind the owner's address (a carrier's or an office's NAT) must
		// not spend the owner's, and keep them from ending a thief's
		// session; nor the thief's session, elsewhere.
		Name: RuleAccountIP, Label: "Session list requests per address", Flow: FlowAccount, Key: KeyAccountNetwork(32, 64),
		Default: ratelimit.Limit{Count: 100, Window: 10 * time.Minute},
		Usage:   "signed-in requests listing or ending sessions and devices, per account and client network",
		Doc:     "Signed-in requests that list the account's sessions and devices (the account page included) or end or forget one, per account and client network.",
	},
	{
		// Counted on failures only, as a lock (apikeys.go): a valid key is
		// never refused by it.
		Name: RuleAPIKeyIP, Label: "Failed API key checks per address", Flow: FlowAPIKey, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 20, Window: 10 * time.Minute}, Lockable: true,
		Usage: "failed API key checks (missing, malformed, unknown or revoked keys) per client network",
		Doc: "Failed API key checks of the decision API (a missing, malformed, unknown or revoked key) per client network, " +
			"the connecting client, never the body's client_ip. Past it, the network's failed checks are answered 429 " +
			"until the window has passed since the last; a valid key still passes.",
	},
	{
		// The second step's rules: every code tried counts, before it is
		// checked (mfa_signin.go). The network's is a rate, right codes
		// included, so that no right answer can reset it and none of an
		// office's can lock it out for longer than the window; the
		// account's counts codes in a row towards a lock (mfaPolicy).
		Name: RuleMFANetwork, Label: "Second-step codes per address", Flow: FlowSecondStep, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 20, Window: 15 * time.Minute},
		Usage:   "second-step codes and passkey assertions tried per client network",
		Doc: "Second-step codes (TOTP or recovery) and passkey assertions tried per client network, right or wrong, " +
			"whatever the account, unknown credentials included; past it they are answered 429 until the window frees a place. " +
			"Apart from the password's limits.",
	},
	{
		// The network's wider rung: each code or assertion looks a token,
		// a ceremony or a credential up, made-up ones included, so a /48
		// of many /64s tries no more of them than the /48's count, as it
		// opens no more links (RuleResetConfirmSite).
		Name: RuleMFASite, Label: "Second-step codes per IPv6 /48", Flow: FlowSecondStep, Key: KeyIPv6Network(48),
		Default: ratelimit.Limit{Count: 800, Window: 15 * time.Minute},
		Usage:   "second-step codes and passkey assertions tried per IPv6 /48",
		Doc: "Second-step codes and passkey assertions tried per IPv6 /48 (one site's allocation), right or wrong, " +
			"however many /64s of it are used; past it they are answered 429 until the window frees a place. " +
			"IPv4 clients are not counted here.",
	},
	{
		Name: RulePasskeyOptionsIP, Label: "Passkey ceremonies begun per address", Flow: FlowPasskeyBegin, Key: KeyNetwork(32, 64),
		Default: ratelimit.Limit{Count: 60, Window: 10 * time.Minute},
		Usage:   "passkey sign-ins, alone or as the second step, and registrations begun per client network",
		Doc: "Sign-ins with a passkey alone or as the second step, and passkey registrations, begun (POST /api/v1/login/passkey/options, " +
			"POST /api/v1/login/mfa/webauthn/options, POST /account/mfa/passkey/options) per client network; each stores a challenge, " +
			"so it is counted before anything is stored or a second step's token is looked up.",
	},
	{
		// Its wider rung: each ceremony begun, without a session for a
		// passwordless sign-in, stores a row, so a /48 of many /64s
		// stores no more of them than the /48's count.
		Name: RulePasskeyOptionsSite, Label: "Passkey ceremonies begun per IPv6 /48", Flow: FlowPasskeyBegin, Key: KeyIPv6Network(48),
		Default: ratelimit.Limit{Count: 2400, Window: 10 * time.Minute},
		Usage:   "passkey sign-ins, alone or as the second step, and registrations begun per IPv6 /48",
		Doc: "Passkey sign-ins, alone or as the second step, and passkey registrations, begun per IPv6 /48 (one site's allocation), " +
			"however many /64s of it are used; each stores a challenge. IPv4 clients are not counted here.",
	},
	{
		// Counted once the passkey is verified, so that only its holder
		// spends it: nobody else can keep the owner's passkey out.
		Name: RulePasskeyAccount, Label: "Passkey sign-ins per account", Flow: FlowPasskeySignIn, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 30, Window: 10 * time.Minute},
		Usage:   "sign-ins with a passkey alone per account, once the passkey is verified",
		Doc: "Sign-ins with a passkey alone per account, counted once the passkey is verified (only its holder spends it); " +
			"past it they are answered 429 until the window frees a place. It bounds the sessions one passkey makes, " +
			"as XCLOAK_LIMIT_LOGIN_ACCOUNT bounds a password's.",
	},
	{
		Name: RuleMFAAccount, Label: "Second-step codes per account", Flow: FlowSecondStep, Key: KeyAccount,
		Default: ratelimit.Limit{Count: 5, Window: 15 * time.Minute}, Lockable: true,
		Usage: "wrong second-step codes in a row per account before its second step is locked",
		Doc: "Second-step codes tried per account in a row; the count-th, if wrong, locks the account's second step " +
			"(the next code is answered 429) for the window, doubling on each repeat up to a day. A right code clears it. " +
			"Apart from the password's lockout, which it never counts towards.",
	},
}

// lockoutLabel names RuleLockout on the dashboard; a lockout is no rate
// limit, so it has no entry in the table.
const lockoutLabel = "Account lockout"

// RuleSpec is one rate limit: what it guards, what it counts per, its
// default and how it is shown.
type RuleSpec struct {
	// Name names the rule in Redis keys, events, metrics, the stats JSON
	// and its setting (XCLOAK_LIMIT_<NAME>, --limit-<name>): 1 to 32
	// characters from [a-z0-9_].
	Name string
	// Label names the rule on the dashboard.
	Label string
	// Flow is the kind of request the rule guards.
	Flow Flow
	// Key derives the identity the rule counts per from a request.
	Key Key
	// Default is the rule's limit unless a setting changes it; zero when
	// the rule shares another's limit or is LockOnly.
	Default ratelimit.Limit
	// SharesLimit names the rule whose limit, and setting, this one uses;
	// each still counts on its own. "" for a limit of its own.
	SharesLimit string
	// Lockable makes the rule refuse while its identity is locked out, and
	// makes failures count towards that lock (ratelimit.Rule.Lockable).
	Lockable bool
	// LockOnly rules, Lockable ones, have no limit, setting or log: they
	// refuse only while their identity is locked (ratelimit.Rule.LockOnly).
	LockOnly bool
	// Replaces names a rule of the same flow that is left out of a
	// decision in which this one applies.
	Replaces string
	// Listed rules are on the dashboard and in the stats JSON even while
	// they have refused nothing; the others show up once they have.
	Listed bool
	// Usage is the setting's --help text (without its format), Doc its
	// description in README's Configuration table; both "" when the rule
	// shares another's limit.
	Usage, Doc string
}

// Flow is a kind of request that rules guard. A request passes every rule
// of its flow that applies to it, in one decision.
type Flow string

// The flows.
const (
	FlowSignIn        Flow = "sign-in"
	FlowResetRequest  Flow = "reset request"
	FlowResetConfirm  Flow = "reset confirmation"
	FlowUnlockRequest Flow = "unlock-link request"
	FlowUnlockConfirm Flow = "unlock-link confirmation"
	// FlowVerifyConfirm is the confirmation of a link that finishes a
	// sign-in held for new-device verification.
	FlowVerifyConfirm Flow = "sign-in link confirmation"
	// FlowLinkMail is a reset or unlock mail about to be sent to an
	// account that exists.
	FlowLinkMail Flow = "link mail"
	// FlowNoticeMail is a notice to an account's owner (a new device, a
	// password change, a second factor) about to be mailed.
	FlowNoticeMail Flow = "owner notice mail"
	// FlowAccount is a signed-in owner's listing or ending of the
	// account's sessions and devices.
	FlowAccount Flow = "account sessions"
	// FlowAPIKey is a check of the API key of a decision API request.
	FlowAPIKey Flow = "API key check"
	// FlowSecondStep is a code tried at a sign-in's second step.
	FlowSecondStep Flow = "second step"
	// FlowPasskeyBegin is the start of a sign-in with a passkey alone.
	FlowPasskeyBegin Flow = "passkey sign-in start"
	// FlowPasskeySignIn is a sign-in with a passkey alone, verified.
	FlowPasskeySignIn Flow = "passkey sign-in"
)

// flows lists every Flow, for the table's check.
var flows = []Flow{FlowSignIn, FlowResetRequest, FlowResetConfirm, FlowUnlockRequest, FlowUnlockConfirm, FlowLinkMail, FlowNoticeMail, FlowVerifyConfirm, FlowAccount, FlowAPIKey, FlowSecondStep, FlowPasskeyBegin, FlowPasskeySignIn}

// Subject is what a request offers its rules to count per; a flow fills in
// what it knows.
type Subject struct {
	Client Client
	// Account is the normalised address the request names; "" if none.
	Account string
	// Device is the nonce of a known device; "" for any other browser.
	Device string
	// Domain is the domain of a mail's recipient.
	Domain string
	// Password is the spraying key of the password a sign-in tries (an
	// HMAC of it, never the password: see spraying.go); "" if none.
	Password string
	// source is Client.Source() when the caller has it already, so that
	// the network key of the same prefixes reuses it rather than write
	// the address again; "" to have it written.
	source string
}

// Key is how a rule's identity is derived from a request. It is a value,
// not a func, so that the table can be checked and printed.
type Key struct {
	kind   keyKind
	v4, v6 int // the prefix lengths of a network key
}

type keyKind uint8

const (
	keyNone keyKind = iota
	keyNetwork
	keyAccount
	keyDevice
	keyDomain
	keyPassword
	keyAccountNetwork
)

// Keys that take a part of the Subject as it is.
var (
	KeyAccount = Key{kind: keyAccount} // the account the request names
	KeyDevice  = Key{kind: keyDevice}  // the known device it comes from
	KeyDomain  = Key{kind: keyDomain}  // the mail recipient's domain
	// KeyPassword is the password a sign-in tries, by its spraying key.
	KeyPassword = Key{kind: keyPassword}
)

// KeyNetwork keys a rule by the client's network: its IPv4 address masked
// to v4Bits, its IPv6 address to v6Bits (a single subscriber is routinely
// handed a whole IPv6 /64 and could otherwise rotate through it). An
// IPv6 address that stands for an IPv4 one (CountedAddr) counts as that
// IPv4 address.
func KeyNetwork(v4Bits, v6Bits int) Key { return Key{kind: keyNetwork, v4: v4Bits, v6: v6Bits} }

// KeyIPv6Network keys a rule by the client's IPv6 network of bits, for a
// rung of the ladder that IPv4 has no counterpart of (an IPv6 /48, one
// site's allocation). The rule does not apply to IPv4 clients, those an
// IPv6 address stands for included (CountedAddr), nor to a client without
// an address: the rules that key every client already count those.
func KeyIPv6Network(bits int) Key { return Key{kind: keyNetwork, v6: bits} }

// KeyAccountNetwork keys a rule by the account the request names and the
// client's network, masked as KeyNetwork masks it: what one account does
// from one network, which neither another account behind the same address
// nor the same account elsewhere counts towards. It does not apply to a
// request that names no account.
func KeyAccountNetwork(v4Bits, v6Bits int) Key {
	return Key{kind: keyAccountNetwork, v4: v4Bits, v6: v6Bits}
}

// ID returns the identity s has under k; ok is false when s has none (no
// account, no known device, no domain, no password) and the rule does not apply. A
// network key always applies: a client without an address counts in one
// shared "unknown" bucket, never skipping the limit.
func (k Key) ID(s Subject) (id string, ok bool) {
	switch k.kind {
	case keyNetwork:
		if k.v4 == 0 && !CountedAddr(s.Client.Addr).Is6() {
			return "", false // an IPv6-only key, and no IPv6 address
		}
		if s.source != "" && k.v4 == sourceBits4 && k.v6 == sourceBits6 {
			return s.source, true
		}
		return networkID(s.Client.Addr, k.v4, k.v6), true
	case keyAccount:
		return s.Account, s.Account != ""
	case keyAccountNetwork:
		if s.Account == "" {
			return "", false
		}
		network := s.source
		if network == "" || k.v4 != sourceBits4 || k.v6 != sourceBits6 {
			network = networkID(s.Client.Addr, k.v4, k.v6)
		}
		// An account has no space (NormaliseEmail), so the two parts
		// cannot run into each other.
		return s.Account + " " + network, true
	case keyDevice:
		return s.Device, s.Device != ""
	case keyDomain:
		return s.Domain, s.Domain != ""
	case keyPassword:
		return s.Password, s.Password != ""
	}
	return "", false
}

// String describes k: "network /32 /64", "IPv6 network /48", "account",
// "device", "domain", "password".
func (k Key) String() string {
	switch k.kind {
	case keyNetwork:
		if k.v4 == 0 {
			return fmt.Sprintf("IPv6 network /%d", k.v6)
		}
		return fmt.Sprintf("network /%d /%d", k.v4, k.v6)
	case keyAccount:
		return "account"
	case keyAccountNetwork:
		return fmt.Sprintf("account and network /%d /%d", k.v4, k.v6)
	case keyDevice:
		return "device"
	case keyDomain:
		return "domain"
	case keyPassword:
		return "password"
	}
	return "none"
}

func (k Key) check() error {
	switch k.kind {
	case keyNone:
		return errors.New("no key")
	case keyNetwork:
		// v4 is zero only for an IPv6-only key (KeyIPv6Network).
		if k.v4 < 0 || k.v4 > 32 || k.v6 < 1 || k.v6 > 128 {
			return fmt.Errorf("network key /%d /%d: want 1..32 (or 0: IPv6 only) and 1..128 bits", k.v4, k.v6)
		}
	case keyAccountNetwork:
		if k.v4 < 1 || k.v4 > 32 || k.v6 < 1 || k.v6 > 128 {
			return fmt.Errorf("account and network key /%d /%d: want 1..32 and 1..128 bits", k.v4, k.v6)
		}
	}
	return nil
}

// networkID names addr's network of v4Bits or v6Bits: "192.0.2.1" for a
// whole IPv4 address, "2001:db8::/64" or "192.0.2.0/24" for a network, and
// "unknown" for no address. The address is the one it is counted by
// (CountedAddr): an IPv6 address that stands for an IPv4 one is named as
// that IPv4 address's network.
func networkID(addr netip.Addr, v4Bits, v6Bits int) string {
	if !addr.IsValid() {
		return "unknown"
	}
	addr = CountedAddr(addr)
	bits := v6Bits
	if addr.Is4() {
		bits = v4Bits
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		// Only a Key that failed its check has such bits.
		return "unknown"
	}
	// Written into a buffer of the longest form ("ffff:...:ffff/128"),
	// so that the name is the one allocation.
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte
	if addr.Is4() && bits == 32 {
		return string(p.Addr().AppendTo(buf[:0]))
	}
	return string(p.AppendTo(buf[:0]))
}

// Rules returns the table of rules, in its order.
func Rules() []RuleSpec { return slices.Clone(rules) }

// LookupRule returns the rule named name.
func LookupRule(name string) (RuleSpec, bool) {
	i := slices.IndexFunc(rules, func(r RuleSpec) bool { return r.Name == name })
	if i < 0 {
		return RuleSpec{}, false
	}
	return rules[i], true
}

// RuleLabel names a rule, or RuleLockout, on the dashboard; "" for a name
// it does not know.
func RuleLabel(name string) string {
	if name == RuleLockout {
		return lockoutLabel
	}
	r, _ := LookupRule(name)
	return r.Label
}

// SignInRules are the rules that refuse sign-ins, RuleLockout included:
// their rejections are sign-in attempts too, and make up Summary.Rejected.
func SignInRules() []string {
	var out []string
	for _, r := range rules {
		if r.Flow == FlowSignIn {
			out = append(out, r.Name)
		}
	}
	return append(out, RuleLockout)
}

// RejectionRules lists the rules the dashboard and the stats JSON always
// show, sign-in rules (RuleLockout last of them) first, in the order the
// dashboard shows them.
func RejectionRules() []string {
	var out []string
	for _, r := range rules {
		if r.Flow == FlowSignIn && r.Listed {
			out = append(out, r.Name)
		}
	}
	out = append(out, RuleLockout)
	for _, r := range rules {
		if r.Flow != FlowSignIn && r.Listed {
			out = append(out, r.Name)
		}
	}
	return out
}

// IsSignInRule reports whether rule refuses sign-ins (rather than resets).
func IsSignInRule(rule string) bool { return slices.Contains(SignInRules(), rule) }

// OwnLimit reports whether r has a limit of its own, and so a setting:
// it neither shares another's nor is LockOnly.
func (r RuleSpec) OwnLimit() bool { return r.SharesLimit == "" && !r.LockOnly }

// Limits are the rate limits the service enforces, by rule name: one for
// every rule of the table with a limit of its own (RuleSpec.OwnLimit).
type Limits map[string]ratelimit.Limit

// DefaultLimits returns every rule's default limit.
func DefaultLimits() Limits {
	l := make(Limits)
	for _, r := range rules {
		if r.OwnLimit() {
			l[r.Name] = r.Default
		}
	}
	return l
}

// SetCount changes the count of rule's limit and keeps its window.
func (l Limits) SetCount(rule string, n int) {
	lim := l[rule]
	lim.Count = n
	l[rule] = lim
}

// Of returns the limit rule enforces: its own, or the one it shares; the
// zero Limit for a LockOnly rule.
func (l Limits) Of(rule string) ratelimit.Limit {
	if r, ok := LookupRule(rule); ok && r.SharesLimit != "" {
		rule = r.SharesLimit
	}
	return l[rule]
}

// Validate checks that l has a valid limit for every rule with a limit of
// its own, and none for any other name.
func (l Limits) Validate() error {
	for _, r := range rules {
		if !r.OwnLimit() {
			continue
		}
		lim, ok := l[r.Name]
		if !ok {
			return fmt.Errorf("limit %s: missing", r.Name)
		}
		if err := lim.Validate(); err != nil {
			return fmt.Errorf("limit %s: %w", r.Name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l)) {
		if r, ok := LookupRule(name); !ok || !r.OwnLimit() {
			return fmt.Errorf("limit %q: no rule has a limit of that name", name)
		}
	}
	return nil
}

// A ruleBook is the table's rules by flow, in the table's order, each
// with its limit from one Limits, found once: the rules of a request,
// built for every one (each rejection of a flood included), then cost no
// lookup of a limit by name.
type ruleBook map[Flow][]boundRule

// boundRule is a rule of a ruleBook and its limit (a LockOnly rule's:
// none).
type boundRule struct {
	RuleSpec
	limit ratelimit.Limit
}

// bookOf binds every rule of the table to its limit in l.
func bookOf(l Limits) ruleBook {
	b := make(ruleBook, len(flowRules))
	for flow, table := range flowRules {
		bound := make([]boundRule, len(table))
		for i, r := range table {
			bound[i].RuleSpec = r
			if r.LockOnly {
				continue
			}
			name := r.Name
			if r.SharesLimit != "" {
				name = r.SharesLimit
			}
			bound[i].limit = l[name]
		}
		b[flow] = bound
	}
	return b
}

// rulesFor returns the rules of flow that apply to the request s, with
// their identities and limits, in the table's order.
func (b ruleBook) rulesFor(flow Flow, s Subject) []ratelimit.Rule {
	table := b[flow]
	out := make([]ratelimit.Rule, 0, len(table))
	// The rules others replace: one at most in today's table.
	var buf [2]string
	replaced := buf[:0]
	for i := range table {
		r := &table[i]
		id, ok := r.Key.ID(s)
		if !ok {
			continue
		}
		if r.Replaces != "" {
			replaced = append(replaced, r.Replaces)
		}
		out = append(out, ratelimit.Rule{Name: r.Name, ID: id, Limit: r.limit, Lockable: r.Lockable})
	}
	if len(replaced) == 0 {
		return out
	}
	return slices.DeleteFunc(out, func(r ratelimit.Rule) bool { return slices.Contains(replaced, r.Name) })
}

// flowRules holds the table's rules by flow, in the table's order, so that
// a request's rules are found without walking the whole table.
var flowRules = func() map[Flow][]RuleSpec {
	m := make(map[Flow][]RuleSpec)
	for _, r := range rules {
		m[r.Flow] = append(m[r.Flow], r)
	}
	return m
}()

// checkRules checks a table of rules: every entry named, labelled, keyed
// and in a flow, with a valid default, a setting's texts, or another
// rule's limit to share, and every name it refers to a rule of the table.
func checkRules(table []RuleSpec) error {
	seen := make(map[string]RuleSpec)
	labels := map[string]bool{lockoutLabel: true}
	for _, r := range table {
		if err := checkRuleName(r.Name); err != nil {
			return err
		}
		if _, dup := seen[r.Name]; dup || r.Name == RuleLockout {
			return fmt.Errorf("rule %s: name taken", r.Name)
		}
		seen[r.Name] = r
		if r.Label == "" || labels[r.Label] {
			return fmt.Errorf("rule %s: label %q empty or taken", r.Name, r.Label)
		}
		labels[r.Label] = true
		if !slices.Contains(flows, r.Flow) {
			return fmt.Errorf("rule %s: unknown flow %q", r.Name, r.Flow)
		}
		if err := r.Key.check(); err != nil {
			return fmt.Errorf("rule %s: %w", r.Name, err)
		}
		if r.LockOnly {
			if !r.Lockable || r.SharesLimit != "" || r.Default != (ratelimit.Limit{}) || r.Usage != "" || r.Doc != "" {
				return fmt.Errorf("rule %s: lock-only, so lockable, with no limit, default or setting", r.Name)
			}
		} else if r.SharesLimit == "" {
			if err := r.Default.Validate(); err != nil {
				return fmt.Errorf("rule %s: default: %w", r.Name, err)
			}
			if r.Usage == "" || r.Doc == "" {
				return fmt.Errorf("rule %s: a limit of its own needs a setting's Usage and Doc", r.Name)
			}
		} else if r.Default != (ratelimit.Limit{}) || r.Usage != "" || r.Doc != "" {
			return fmt.Errorf("rule %s: shares the limit of %s, so has no default or setting of its own", r.Name, r.SharesLimit)
		}
	}
	for _, r := range table {
		if r.SharesLimit != "" {
			if shared, ok := seen[r.SharesLimit]; !ok || !shared.OwnLimit() {
				return fmt.Errorf("rule %s: shares the limit of %q, which is no rule with a limit of its own", r.Name, r.SharesLimit)
			}
		}
		if r.Replaces != "" {
			if other, ok := seen[r.Replaces]; !ok || other.Flow != r.Flow || r.Replaces == r.Name {
				return fmt.Errorf("rule %s: replaces %q, which is no other rule of its flow", r.Name, r.Replaces)
			}
		}
	}
	return nil
}

// checkRuleName holds a name to what Redis keys and settings take.
func checkRuleName(name string) error {
	if name == "" || len(name) > 32 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return fmt.Errorf("rule %q: a name is 1 to 32 characters from [a-z0-9_]", name)
	}
	return nil
}
