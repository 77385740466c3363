// Every error code of ObjectGraph, in one file as Core Data keeps its codes in `CoreDataErrors.h`,
// so that no two share a number (a test enumerates `allCases`). Core Data's numbers are kept
// where Core Data has the error.

// MARK: - Validation (1550-1680)

extension ValidationError.Code: CaseIterable {
    /// A generic failure, such as a rule from application code (Core Data's `NSManagedObjectValidationError`).
    public static let generic = Self(rawValue: 1550)
    /// Several failures, listed in ``ValidationError/detailedErrors`` (`NSValidationMultipleErrorsError`).
    public static let multiple = Self(rawValue: 1560)
    /// A required value is missing (`NSValidationMissingMandatoryPropertyError`).
    public static let missingMandatoryProperty = Self(rawValue: 1570)
    /// A to-many relationship has fewer objects than its minimum (`NSValidationRelationshipLacksMinimumCountError`).
    public static let relationshipLacksMinimumCount = Self(rawValue: 1580)
    /// A to-many relationship has more objects than its maximum (`NSValidationRelationshipExceedsMaximumCountError`).
    public static let relationshipExceedsMaximumCount = Self(rawValue: 1590)
    /// A Deny delete rule refused the deletion (`NSValidationRelationshipDeniedDeleteError`).
    public static let relationshipDeniedDelete = Self(rawValue: 1600)
    /// A number is above its maximum (`NSValidationNumberTooLargeError`).
    public static let numberTooLarge = Self(rawValue: 1610)
    /// A number is below its minimum (`NSValidationNumberTooSmallError`).
    public static let numberTooSmall = Self(rawValue: 1620)
    /// A date is after its latest (`NSValidationDateTooLateError`).
    public static let dateTooLate = Self(rawValue: 1630)
    /// A date is before its earliest (`NSValidationDateTooSoonError`).
    public static let dateTooSoon = Self(rawValue: 1640)
    /// A string is longer than its maximum length (`NSValidationStringTooLongError`).
    public static let stringTooLong = Self(rawValue: 1660)
    /// A string is shorter than its minimum length (`NSValidationStringTooShortError`).
    public static let stringTooShort = Self(rawValue: 1670)
    /// A string does not match its pattern (`NSValidationStringPatternMatchingError`).
    public static let stringPatternMatching = Self(rawValue: 1680)

    /// Every code, in numeric order. A new code goes here too.
    public static let allCases: [Self] = [
        .generic, .multiple, .missingMandatoryProperty, .relationshipLacksMinimumCount,
        .relationshipExceedsMaximumCount, .relationshipDeniedDelete, .numberTooLarge, .numberTooSmall, .dateTooLate,
        .dateTooSoon, .stringTooLong, .stringTooShort, .stringPatternMatching,
    ]
}

// MARK: - Object graph (133000-134190)

extension ObjectGraphError.Code: CaseIterable {
    /// The referenced object no longer exists (Core Data's `NSManagedObjectReferentialIntegrityError`).
    public static let objectNotFound = Self(rawValue: 133000)
    /// Another context or process changed or deleted a row this save would overwrite
    /// (Core Data's `NSManagedObjectMergeError`).
    public static let mergeConflict = Self(rawValue: 133020)
    /// Objects share the values of a uniqueness constraint (Core Data's
    /// `NSManagedObjectConstraintMergeError`).
    public static let constraintConflict = Self(rawValue: 133021)
    /// A save could not be written (Core Data's `NSPersistentStoreSaveError`).
    public static let saveFailed = Self(rawValue: 134030)
    /// A stored value cannot be read as its attribute's type, or its transformer failed
    /// (Core Data's general error, `NSCoreDataError`).
    public static let undecodableValue = Self(rawValue: 134060)
    /// A row holds what no store writes (an encoded value that is not a BLOB, a version that
    /// cannot grow, keys that cannot be allocated): the store was damaged or edited by hand.
    /// Not a Core Data code: the one after ``undecodableValue``, its closest kin.
    public static let damagedRow = Self(rawValue: 134061)
    /// A store cannot be opened: missing, not a store, or refused by SQLite
    /// (Core Data's `NSPersistentStoreOpenError`).
    public static let storeOpenFailed = Self(rawValue: 134080)
    /// A request the receiver cannot serve, such as a fetched results controller's request
    /// without sort descriptors (Core Data's `NSPersistentStoreUnsupportedRequestTypeError`).
    public static let invalidRequest = Self(rawValue: 134091)
    /// The store was made with a model whose persisted shape differs
    /// (Core Data's `NSPersistentStoreIncompatibleVersionHashError`).
    public static let incompatibleVersionHash = Self(rawValue: 134100)
    /// A migration failed while running (a value could not be carried over); nothing was changed
    /// (Core Data's `NSMigrationError`).
    public static let migrationFailed = Self(rawValue: 134110)
    /// No migration is possible: no version of the model fits the store, or a change cannot be
    /// inferred and no custom step covers it. Nothing was written (Core Data's `NSInferredMappingModelError`).
    public static let migrationCannotBeInferred = Self(rawValue: 134190)
    /// A migration would drop values, objects or links, and the coordinator does not allow it
    /// (``PersistentStoreCoordinator/allowsLossyMigration``); nothing was written. Not a Core
    /// Data code: the one after ``migrationCannotBeInferred``.
    public static let migrationWouldLoseData = Self(rawValue: 134191)

    /// Every code, in numeric order. A new code goes here too.
    public static let allCases: [Self] = [
        .objectNotFound, .mergeConflict, .constraintConflict, .saveFailed, .undecodableValue, .damagedRow,
        .storeOpenFailed, .invalidRequest, .incompatibleVersionHash, .migrationFailed, .migrationCannotBeInferred,
        .migrationWouldLoseData,
    ]
}
