#ifndef XML_READING_H
#define XML_READING_H

#include <stddef.h>

/// What the reader hands its caller, element by element. Each returns nonzero to stop reading.
typedef struct XMLReadingCallbacks {
    void *context;
    /// `attributes` holds name, value, name, value… and ends with NULL.
    int (*startElement)(void *context, const char *name, const char *const *attributes, int line);
    int (*endElement)(void *context, const char *name);
    /// Text in pieces; a run of text may come in several.
    int (*characters)(void *context, const char *bytes, int length);
} XMLReadingCallbacks;

/// The first error libxml2 reported: its code (xmlerror.h), where, and its message.
typedef struct XMLReadingError {
    int code;
    int line;
    int column;
    char message[200];
} XMLReadingError;

enum {
    XMLReadingFinished = 0,
    XMLReadingStopped = 1,
    XMLReadingNotWellFormed = 2,
    XMLReadingLibraryMissing = 3,
};

/// Reads a whole document with libxml2, loaded on first use: no network, no external entities,
/// no DTD loaded; as UTF-8 whatever it declares when `asUTF8`. Returns one of the values above;
/// `error` is filled for the last two.
int xml_reading_read(const char *bytes, int length, int asUTF8, const XMLReadingCallbacks *callbacks,
                     XMLReadingError *error);

#endif
