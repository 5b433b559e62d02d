// Package breached answers one question: is this password in a corpus of
// breached passwords? NIST SP 800-63B asks that a new password be checked
// against such a list, and a password that signs in while it is on one is
// known to whoever holds the list.
//
// The corpus is read in the k-anonymity range form of Troy Hunt's Pwned
// Passwords: the upper-case hex SHA-1 of a password is split into a
// 5-digit prefix and a 35-digit suffix, and the range of a prefix lists
// the suffixes of every breached password sharing it, one "SUFFIX:COUNT"
// a line. Only the prefix ever leaves the process; the suffix is
// compared here. Two sources of ranges are read (Open chooses by the
// setting's form):
//
//   - a directory holding one file per prefix, named "ABCDE.txt" or
//     "ABCDE", as the public PwnedPasswordsDownloader writes it
//     (dotnet tool install --global haveibeenpwned-downloader;
//     haveibeenpwned-downloader -s false <directory>);
//   - an HTTP range API: for the base URL B, the range of ABCDE is
//     GET B/range/ABCDE, sent with "Add-Padding: true", so that the size
//     of an answer says nothing of the prefix; padding lines, of count 0,
//     are skipped. https://api.pwnedpasswords.com is the public one.
//
// Every lookup is bounded in time and in the bytes it reads. A Checker
// reports failures as errors; what a failure means (a sign-in goes on, a
// new password is accepted) is for the caller to decide. No error
// carries the password, its hash, or the prefix.
//
// A corpus that cannot answer is an error, never a silent "not breached":
// Open refuses a directory that holds no range file, or whose first range
// file is no range, and a lookup refuses a range (a file, or an API's
// answer with 200) that is empty or holds a line other than
// "SUFFIX:COUNT" (ErrNotARange). A real range is never empty: every
// prefix is shared by hundreds of breached passwords. A prefix with no
// file in a directory is still a prefix of no breach, so that a partial
// corpus (a test's, or passwords of one's own) can be used.
package breached
