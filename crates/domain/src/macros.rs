//! `string_enum!`: closed sets of values with one wire string each (severity, status, kind...).
//!
//! The wire string is written once, next to the variant; `as_str`, `FromStr`, `Display`,
//! serde and the list of allowed values (for error messages and the OpenAPI enum) derive from it.

macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire string of this value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The wire strings of every value, for error messages and schemas.
            pub fn allowed() -> Vec<&'static str> {
                Self::ALL.iter().map(|v| v.as_str()).collect()
            }
        }

        impl $crate::ClosedSet for $name {
            const WHAT: &'static str = $what;

            fn allowed() -> Vec<&'static str> {
                $name::allowed()
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::error::Error;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::error::Error::invalid(
                        $what,
                        format!(
                            "unknown value {:?}; allowed: {}",
                            s,
                            Self::allowed().join(", ")
                        ),
                    )),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                text.parse().map_err(|_| {
                    ::serde::de::Error::custom(format!(
                        "unknown {} {:?}; allowed: {}",
                        $what,
                        text,
                        Self::allowed().join(", ")
                    ))
                })
            }
        }
    };
}
