package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/seckill-lab/seckill/core"
)

// decodeStrict parses a JSON body into dst: unknown fields, wrong types
// and trailing data are 400s.
func decodeStrict(c *fiber.Ctx, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return &core.Error{Code: core.CodeBadRequest, Op: core.OpDecodeJSON, Message: "invalid JSON body", Err: err}
	}
	if dec.More() {
		return badRequest("invalid JSON body: trailing data")
	}
	return nil
}

// clientMessage is err's message for the client. A JSON body that did not
// decode (core.OpDecodeJSON: this API's, or a payment provider's notice)
// is said in the client's terms — the field, and the kind of value it
// wants — never encoding/json's text, which names Go types and struct
// fields ("Go struct field Notice.amount of type int64").
func clientMessage(err error) string {
	msg := core.MessageOf(err)
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ce, ok := e.(*core.Error); ok && ce.Op == core.OpDecodeJSON && ce.Err != nil {
			return msg + ": " + jsonProblem(ce.Err)
		}
	}
	return msg
}

func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var parse *time.ParseError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too soon"
	case errors.As(err, &syntax):
		return fmt.Sprintf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("field %q: want %s, not %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("want %s, not %s", jsonKind(typ.Type), typ.Value)
	case errors.As(err, &parse):
		return "a time is not RFC 3339 (e.g. 2026-12-06T10:00:00Z)"
	}
	// The decoder's own words for a field the body may not have; every
	// other text of encoding/json may name Go types, so it is not passed on.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + field
	}
	return "not the JSON this endpoint takes"
}

// jsonKind names the JSON value a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another kind of value"
}
