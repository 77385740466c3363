import Foundation

/// mystash links the Swift runtime and Foundation statically: loading them as shared libraries
/// was most of a command's start. A static link keeps only the archive members something names,
/// and Foundation's bridging between Swift values and its classes (an Array as an NSArray, an
/// NSUUID as a UUID) lives in members the runtime finds at a cast, through conformances nothing
/// names. Without these names a property list holding an array fails to serialize ("Not A Type")
/// and a cast from a Foundation object fails as if the value were of another type.
///
/// Public so that the compiler keeps it though nothing reads it: it is never evaluated, which
/// would make every command's start instantiate these types.
public enum FoundationBridging {
    /// The value types Foundation bridges, each as its bridging conformance (a witness table the
    /// optimizer cannot fold away, where a bridging method's body is inlined and names nothing),
    /// and their classes.
    public static let linked: ([any _ObjectiveCBridgeable.Type], [AnyClass]) = (
        [
            [Int].self, [String: Int].self, Set<Int>.self, String.self, Substring.self, AnyHashable.self,
            Int.self, Bool.self, Double.self, Data.self, Date.self, DateInterval.self, DateComponents.self,
            Decimal.self, UUID.self, URL.self, URLComponents.self, URLQueryItem.self, IndexPath.self,
            IndexSet.self, CharacterSet.self, Locale.self, TimeZone.self, Calendar.self,
            Measurement<UnitLength>.self, PersonNameComponents.self, AffineTransform.self, Notification.self,
            CocoaError.self,
        ],
        [
            NSArray.self, NSDictionary.self, NSSet.self, NSString.self, NSNumber.self, NSData.self, NSDate.self,
            NSDateInterval.self, NSDateComponents.self, NSDecimalNumber.self, NSUUID.self, NSURL.self,
            NSURLComponents.self, NSURLQueryItem.self, NSIndexPath.self, NSIndexSet.self, NSCharacterSet.self,
            NSLocale.self, NSTimeZone.self, NSCalendar.self, NSMeasurement.self, NSPersonNameComponents.self,
            NSAffineTransform.self, NSNotification.self, NSError.self,
        ]
    )
}
