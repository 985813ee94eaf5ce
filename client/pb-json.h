/* Prints any protobuf-c message as one line of JSON, driven by its
 * descriptor: field names as in the .proto, enums by name, bytes as
 * (escaped) text, absent optional fields left out. For sictl --json. */
#ifndef SI_PB_JSON_H
#define SI_PB_JSON_H

#include <stdio.h>
#include <protobuf-c/protobuf-c.h>

void si_json_string(FILE *f, const char *s, size_t len);
void si_json_message(FILE *f, const ProtobufCMessage *m);

#endif
