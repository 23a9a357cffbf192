package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"
)

// LoginCode is a one-time code of phone login, on its way to the phone.
type LoginCode struct {
	// Phone is the number in E.164 (NormalizePhone).
	Phone string
	// Code is six digits, or ten once the phone has had its short codes
	// in the window (someone else is asking for its codes too).
	Code string
	// Challenge names the code: only the asker gets it, and only guesses
	// sent with it are judged against this code. It is not sent to the
	// phone.
	Challenge string
	// ExpiresAt is when the code stops being accepted.
	ExpiresAt time.Time
	// From is the asking client's address (its limit key), whose budget
	// the code counts against.
	From string
}

// CodeSender delivers login codes to phones: an SMS gateway's webhook, or
// an SMS provider's SDK behind an adapter of its own. Send returns once the
// gateway has taken the code; an error means the shopper will not get it
// (the code is then withdrawn and the shopper told to try again). Send is
// called within the shopper's request and must honour ctx's deadline.
type CodeSender interface {
	Send(ctx context.Context, code LoginCode) error
}

// ErrInvalidPhone: the text is not a phone number that can receive a code.
var ErrInvalidPhone = E(CodeBadRequest, "phone is not a valid phone number")

// maxPhoneInput bounds what is handed to the parser: no real number, with
// its spaces and punctuation, is longer.
const maxPhoneInput = 32

// NormalizePhone reads a phone number as a person would write it — with or
// without a country code, +, 00 or the national trunk prefix, spaces,
// dashes or dots — and returns it in E.164 (+8613811112222), the one form
// that names a user, a code and a limit. A number without a country code is
// read in region (ISO 3166 alpha-2, e.g. "CN"). Numbers that cannot exist
// in their country (libphonenumber's IsValidNumber) are ErrInvalidPhone.
//
// A number written with its country code but without + or 00
// (8613811112222) is read as a national number first, as libphonenumber
// does, and failing that, with the country code it starts with.
func NormalizePhone(raw, region string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > maxPhoneInput {
		return "", ErrInvalidPhone
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789+-.() ", r) {
			return "", ErrInvalidPhone
		}
	}
	if n, err := phonenumbers.Parse(s, region); err == nil && phonenumbers.IsValidNumber(n) {
		return phonenumbers.Format(n, phonenumbers.E164), nil
	}
	if !strings.HasPrefix(s, "+") && !strings.HasPrefix(s, "0") {
		if n, err := phonenumbers.Parse("+"+s, region); err == nil && phonenumbers.IsValidNumber(n) {
			return phonenumbers.Format(n, phonenumbers.E164), nil
		}
	}
	return "", ErrInvalidPhone
}

// ErrPhoneNotAllowed: the number is valid, but login codes do not go to
// it (not a mobile number, or not of the allowed regions).
var ErrPhoneNotAllowed = E(CodePhoneNotAllowed, "login codes are sent only to mobile numbers of the regions this shop serves")

// DisplayPhone is phone (E.164) as its region writes it internationally,
// "+86 137 0000 0009": what a shopper reads as their own number (phone
// itself where it does not parse).
func DisplayPhone(phone string) string {
	n, err := phonenumbers.Parse(phone, "")
	if err != nil {
		return phone
	}
	return phonenumbers.Format(n, phonenumbers.INTERNATIONAL)
}

// MayReceiveCodes reports whether a login code may be sent to phone (E.164,
// from NormalizePhone): a mobile number (libphonenumber's MOBILE, or
// FIXED_LINE_OR_MOBILE where a region's numbers do not tell) of one of
// regions. Landlines, premium-rate, shared-cost and toll-free numbers are
// refused: texts to them are how SMS pumping earns its money, and no
// shopper reads a code on them. Else it is ErrPhoneNotAllowed.
func MayReceiveCodes(phone string, regions []string) error {
	n, err := phonenumbers.Parse(phone, "")
	if err != nil {
		return ErrInvalidPhone
	}
	if !slices.Contains(regions, phonenumbers.GetRegionCodeForNumber(n)) {
		return ErrPhoneNotAllowed
	}
	switch phonenumbers.GetNumberType(n) {
	case phonenumbers.MOBILE, phonenumbers.FIXED_LINE_OR_MOBILE:
		return nil
	}
	return ErrPhoneNotAllowed
}

// ValidRegion reports whether region is a region libphonenumber knows.
func ValidRegion(region string) bool {
	return phonenumbers.GetCountryCodeForRegion(region) != 0
}

// PhoneCollision is a set of users whose stored numbers are one phone once
// normalised: accounts made before numbers were normalised. The phone logs
// in as the oldest (the lowest id); merging the others is an admin's call.
type PhoneCollision struct {
	Phone   string  `json:"phone"`
	UserIDs []int64 `json:"userIds"`
}

// ErrNoSuchUser: no user has this phone.
var ErrNoSuchUser = errors.New("no user has this phone")
