package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-lab/seckill/core"
)

// UserIDByPhone implements core.UserRepository: the user of this phone
// (E.164), created if new. Where numbers stored before normalisation
// collide, the oldest user (the lowest id) is the phone's. Two first logins
// racing both end with the same id.
func (s *Users) UserIDByPhone(ctx context.Context, phone string) (int64, error) {
	for range 2 {
		var id int64
		// phone = ? too: a row written by an older server during a rolling
		// start has no phone_e164 yet.
		err := s.db.NewSelect().Model((*userRow)(nil)).Column("id").
			Where("phone_e164 = ? OR phone = ?", phone, phone).OrderExpr("id").Limit(1).Scan(ctx, &id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("mysqlstore: find user: %w", err)
		}
		now := time.Now().UTC()
		row := userRow{Phone: phone, PhoneE164: &phone, NickName: "user_" + phone[max(0, len(phone)-4):], CreateTime: now, UpdateTime: now}
		_, err = s.db.NewInsert().Model(&row).Exec(ctx)
		if err == nil {
			return row.ID, nil
		}
		if !isDuplicateKey(err) {
			return 0, fmt.Errorf("mysqlstore: create user: %w", err)
		}
	}
	return 0, errors.New("mysqlstore: user vanished between insert and select")
}

// PhoneReport is what NormalizePhones did.
type PhoneReport struct {
	// Normalized rows now store their phone in E.164.
	Normalized int
	// Unreadable rows hold a number that is not one (they cannot log in).
	Unreadable int
	// Collisions are the phones several users share once normalised.
	Collisions []core.PhoneCollision
}

// NormalizePhones reads every user whose phone has not been read yet
// (phone_e164 NULL) with normalize, records the E.164 form, and rewrites
// the phone itself to it unless another user already stores that form
// (then the rows stay as they were: merging accounts is an admin's call).
// It is idempotent and safe to run on several instances at once.
func (s *Users) NormalizePhones(ctx context.Context, normalize func(string) (string, error)) (PhoneReport, error) {
	var rep PhoneReport
	for {
		var rows []userRow
		err := s.db.NewSelect().Model(&rows).Column("id", "phone").Where("phone_e164 IS NULL").OrderExpr("id").Limit(500).Scan(ctx)
		if err != nil {
			return rep, fmt.Errorf("mysqlstore: users to normalise: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			e164, err := normalize(r.Phone)
			if err != nil {
				// Not a number anyone can log in with; '' marks it read.
				e164 = ""
				rep.Unreadable++
			}
			if _, err := s.db.NewUpdate().Model((*userRow)(nil)).Set("phone_e164 = ?", e164).
				Where("id = ? AND phone_e164 IS NULL", r.ID).Exec(ctx); err != nil {
				return rep, fmt.Errorf("mysqlstore: record E.164 of user %d: %w", r.ID, err)
			}
			if e164 == "" || e164 == r.Phone {
				continue
			}
			_, err = s.db.NewUpdate().Model((*userRow)(nil)).Set("phone = ?", e164).Set("update_time = ?", time.Now().UTC()).
				Where("id = ?", r.ID).Exec(ctx)
			switch {
			case err == nil:
				rep.Normalized++
			case isDuplicateKey(err):
				// Another user stores this form already: a collision.
			default:
				return rep, fmt.Errorf("mysqlstore: normalise phone of user %d: %w", r.ID, err)
			}
		}
	}
	var err error
	rep.Collisions, err = s.PhoneCollisions(ctx)
	return rep, err
}

// PhoneCollisions lists the phones that several users share once
// normalised, each with its users, oldest first.
func (s *Users) PhoneCollisions(ctx context.Context) ([]core.PhoneCollision, error) {
	var rows []userRow
	err := s.db.NewSelect().Model(&rows).Column("id", "phone_e164").
		Where("phone_e164 IN (?)", s.db.NewSelect().Model((*userRow)(nil)).Column("phone_e164").
			Where("phone_e164 <> ''").Group("phone_e164").Having("COUNT(*) > 1")).
		OrderExpr("phone_e164, id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: phone collisions: %w", err)
	}
	var out []core.PhoneCollision
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Phone == *r.PhoneE164 {
			out[n-1].UserIDs = append(out[n-1].UserIDs, r.ID)
			continue
		}
		out = append(out, core.PhoneCollision{Phone: *r.PhoneE164, UserIDs: []int64{r.ID}})
	}
	return out, nil
}

// UserPhone is a user's phone, in E.164 where it was read; core.ErrNotFound
// when there is no such user (a token for an id no login made).
func (s *Users) UserPhone(ctx context.Context, userID int64) (string, error) {
	var row userRow
	err := s.db.NewSelect().Model(&row).Column("phone", "phone_e164").Where("id = ?", userID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNoSuchUser
	}
	if err != nil {
		return "", fmt.Errorf("mysqlstore: user phone: %w", err)
	}
	if row.PhoneE164 != nil && *row.PhoneE164 != "" {
		return *row.PhoneE164, nil
	}
	return row.Phone, nil
}

// ErrNoSuchUser: no user has the id.
var ErrNoSuchUser = errors.New("mysqlstore: no such user")

// OrdersOfUser lists a user's persisted orders, newest first, at most
// limit (idx_order_buyer).
func (s *Users) OrdersOfUser(ctx context.Context, userID int64, limit int) ([]core.Order, error) {
	var rows []orderRow
	if err := s.db.NewSelect().Model(&rows).Where("user_id = ?", userID).OrderExpr("create_time DESC, id DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("mysqlstore: orders of user: %w", err)
	}
	out := make([]core.Order, len(rows))
	for i, r := range rows {
		out[i] = r.order()
	}
	return out, nil
}
