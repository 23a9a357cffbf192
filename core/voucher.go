package core

import (
	"strings"
	"time"
)

// Voucher is a seckill voucher: a limited stock sold inside a time window.
// Values are in the smallest currency unit.
type Voucher struct {
	ID          int64
	Title       string
	PayValue    int64
	ActualValue int64
	Stock       int64
	BeginAt     time.Time
	EndAt       time.Time
}

// MaxStock bounds a voucher's stock so that Redis and SQL integers agree.
const MaxStock = 1_000_000_000

// Validate reports the first problem with a voucher an admin wants to create.
func (v Voucher) Validate() error {
	switch {
	case strings.TrimSpace(v.Title) == "":
		return E(CodeBadRequest, "title is required")
	case len(v.Title) > 255:
		return E(CodeBadRequest, "title is longer than 255 bytes")
	case v.PayValue < 0 || v.ActualValue < 0:
		return E(CodeBadRequest, "payValue and actualValue must not be negative")
	case v.Stock <= 0 || v.Stock > MaxStock:
		return E(CodeBadRequest, "stock must be between 1 and 1000000000")
	case v.BeginAt.IsZero() || v.EndAt.IsZero():
		return E(CodeBadRequest, "beginTime and endTime are required")
	case !v.EndAt.After(v.BeginAt):
		return E(CodeBadRequest, "endTime must be after beginTime")
	}
	return nil
}
